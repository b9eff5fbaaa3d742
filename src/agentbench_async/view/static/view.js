// agentbench view: the only script. A page whose <body> has data-refresh="SECONDS" reloads every SECONDS while
// the tab is visible: the live page only its #live element (fetched from the server, which renders and
// escapes it), any other page (one waiting for bootstrap intervals) as a whole.
(function () {
  "use strict";
  var seconds = parseFloat(document.body.getAttribute("data-refresh") || "0");
  var target = document.getElementById("live");
  if (!seconds) { return; }
  if (!target) {  // a page waiting for a result computed in the background: reload it whole
    setInterval(function () { if (!document.hidden) { location.reload(); } }, seconds * 1000);
    return;
  }
  var busy = false;
  function refresh() {
    if (busy || document.hidden) { return; }
    busy = true;
    var sep = location.search ? "&" : "?";
    fetch(location.pathname + location.search + sep + "fragment=1", { cache: "no-store" })
      .then(function (r) { if (!r.ok) { throw new Error("HTTP " + r.status); } return r.text(); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById("live");
        if (fresh) { target.replaceWith(fresh); target = fresh; }
        document.body.removeAttribute("data-stale");
      })
      .catch(function () { document.body.setAttribute("data-stale", "yes"); })
      .then(function () { busy = false; });
  }
  setInterval(refresh, seconds * 1000);
})();
