/* vendor.3f9a1c2e.js — "kit", a tiny DOM helper used by app.js.
 * It stands in for the third-party bundle a real site ships under a
 * content-hashed name: servd-pack marks such names immutable. */
(function (global) {
  "use strict";

  /* h("li", {class: "card"}, [child, "text"]) builds an element. Text is
   * always inserted as text nodes, never parsed as HTML. */
  function h(tag, props, children) {
    var el = document.createElement(tag);
    var key;
    for (key in props || {}) {
      if (!Object.prototype.hasOwnProperty.call(props, key)) continue;
      if (key === "class") el.className = props[key];
      else if (key === "text") el.textContent = props[key];
      else el.setAttribute(key, props[key]);
    }
    (children || []).forEach(function (c) {
      el.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    });
    return el;
  }

  /* 107679 -> "105.2 KiB": sizes as people read them. */
  function formatBytes(n) {
    var units = ["B", "KiB", "MiB", "GiB"];
    var i = 0;
    while (n >= 1024 && i < units.length - 1) {
      n /= 1024;
      i++;
    }
    return (i === 0 ? String(n) : n.toFixed(1)) + "\u00a0" + units[i];
  }

  global.kit = { h: h, formatBytes: formatBytes, version: "1.0.0" };
})(window);
