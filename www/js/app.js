/* app.js — the sample site's script.
 *
 * It proves that scripts run and that JSON arrives intact from the pack:
 *   - <body data-ready="yes"> as soon as it runs;
 *   - marks the current page in the navigation;
 *   - on pages with #site-data, fetches /data/site.json, renders it, and
 *     sets <body data-json="loaded"> (or data-json="error" with a message).
 * Browser tests check those attributes. */
(function () {
  "use strict";

  var body = document.body;
  body.dataset.ready = "yes";
  body.dataset.vendor = window.kit ? "yes" : "no";

  /* Highlight the navigation link that points at this page. */
  function markCurrentNav() {
    var here = location.pathname.replace(/index\.html$/, "");
    var links = document.querySelectorAll(".site-nav a");
    Array.prototype.forEach.call(links, function (a) {
      if (a.getAttribute("href") === here) a.setAttribute("aria-current", "page");
    });
  }

  function render(target, data) {
    var h = window.kit.h;
    var list = h("ul", { class: "cards", id: "features" });
    data.features.forEach(function (f) {
      list.appendChild(h("li", { class: "card" }, [h("h3", { text: f.title }), h("p", { text: f.text })]));
    });
    target.replaceChildren(
      h("p", { class: "status", "data-state": "ok" }, [
        data.name + " " + data.version + " — " + data.tagline + " (" + data.features.length + " features, " +
          window.kit.formatBytes(data.sample_pack_bytes) + " sample pack)"
      ]),
      list
    );
  }

  function fail(target, why) {
    body.dataset.json = "error";
    target.replaceChildren(window.kit
      ? window.kit.h("p", { class: "status", "data-state": "error", text: "Could not load /data/site.json: " + why })
      : document.createTextNode("Could not load /data/site.json: " + why));
  }

  markCurrentNav();

  var target = document.getElementById("site-data");
  if (!target) return;
  if (!window.kit) {
    fail(target, "vendor script missing");
    return;
  }
  fetch("/data/site.json", { headers: { Accept: "application/json" } })
    .then(function (res) {
      if (!res.ok) throw new Error("HTTP " + res.status);
      return res.json();
    })
    .then(function (data) {
      render(target, data);
      body.dataset.json = "loaded";
    })
    .catch(function (err) {
      fail(target, err.message);
    });
})();
