-- bench/swap/mix.lua - wrk request mix for bench/swap: the swap fixture's paths, every
-- Accept-Encoding, and a share of single and suffix ranges, on keep-alive connections.
-- Every range starts inside the smallest variant of every version, so every answer is a
-- 200 or a 206: wrk's "Non-2xx or 3xx responses" must stay 0.
local paths = {"/index.html", "/about/index.html", "/js/app.js", "/css/site.css",
               "/data/feed.json", "/robots.txt"}
local codings = {"identity", "gzip", "br", "zstd"}
local big_share = tonumber(os.getenv("SWAP_BIG_SHARE") or "0.01")
-- The smallest variant of any path in any version (wrk_swaps.py reads it from the packs):
-- every range starts below it.
local smallest = tonumber(os.getenv("SWAP_SMALLEST") or "40")

math.randomseed(os.time())

request = function()
   local path
   if math.random() < big_share then
      path = "/img/big.bin"
   else
      path = paths[math.random(#paths)]
   end
   local h = {["Accept-Encoding"] = codings[math.random(#codings)]}
   local r = math.random()
   if r < 0.2 then
      local first = math.random(0, smallest - 1)
      h["Range"] = "bytes=" .. first .. "-" .. (first + math.random(0, 5000))
   elseif r < 0.25 then
      h["Range"] = "bytes=-" .. math.random(1, 5000)
   end
   return wrk.format("GET", path, h)
end
