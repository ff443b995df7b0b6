// Verity explorer: swap the sections the page's /events stream (server-sent events) sends, without a reload.
(function () {
  "use strict";
  var main = document.querySelector("main[data-events]");
  var status = document.getElementById("live-status");
  if (!main || !window.EventSource) { if (status) status.textContent = "static page"; return; }
  function say(text, cls) { if (status) { status.textContent = text; status.className = "live-status " + (cls || ""); } }
  var source = new EventSource(main.getAttribute("data-events"));
  source.addEventListener("hello", function () { say("live", "on"); });
  source.addEventListener("fragment", function (event) {
    var part = JSON.parse(event.data);
    var el = document.getElementById(part.id);
    if (!el) return;
    var open = {};  // keep the dispute trails people opened open across the swap
    el.querySelectorAll("details[open]").forEach(function (d, i) { open[i] = true; });
    el.innerHTML = part.html;
    el.querySelectorAll("details").forEach(function (d, i) { if (open[i]) d.open = true; });
    el.classList.remove("flash"); void el.offsetWidth; el.classList.add("flash");
    document.body.setAttribute("data-updates", String(Number(document.body.getAttribute("data-updates") || 0) + 1));
    say("live · updated " + new Date().toLocaleTimeString(), "on");
  });
  source.addEventListener("problem", function (event) { say("live · " + JSON.parse(event.data), "warn"); });
  source.onerror = function () { say("reconnecting…", "warn"); };
})();
