-- site.lua: wrk cycles through a request list written by bench/http/site.py.
-- Each line of the list file (the script's argument): PATH TAB ACCEPT-ENCODING TAB IF-NONE-MATCH,
-- empty fields meaning "no such header". Requests are pre-formatted once in init().
local reqs = {}
local i = 0

init = function(args)
  for line in io.lines(args[1]) do
    local path, ae, inm = line:match("^([^\t]*)\t([^\t]*)\t([^\t]*)$")
    local h = {}
    if ae ~= "" then h["Accept-Encoding"] = ae end
    if inm ~= "" then h["If-None-Match"] = inm end
    reqs[#reqs + 1] = wrk.format("GET", path, h)
  end
  if #reqs == 0 then error("site.lua: no requests in " .. args[1]) end
end

request = function()
  i = i % #reqs + 1
  return reqs[i]
end
