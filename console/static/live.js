// The console's live refresh. Every element of class "live" with an id is
// replaced, every 10 seconds while the page is visible, by its copy in the
// page fetched again: the charts move and the figures change, while forms
// and open <details> are left as they are. Without JavaScript the pages are
// the same, only still.
(function () {
  "use strict";
  var period = 10000;

  function refresh() {
    return fetch(location.href, { credentials: "same-origin", redirect: "manual" })
      .then(function (r) {
        if (r.status !== 200) {
          throw new Error("refresh: " + r.status);
        }
        return r.text();
      })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var n = 0;
        document.querySelectorAll(".live[id]").forEach(function (el) {
          var fresh = doc.getElementById(el.id);
          if (fresh) {
            el.replaceWith(document.importNode(fresh, true));
            n++;
          }
        });
        return n;
      });
  }

  // (A test calls it to refresh now.)
  window.seglogRefresh = refresh;
  if (!document.querySelector(".live[id]")) {
    return;
  }
  setInterval(function () {
    if (!document.hidden) {
      refresh().catch(function () {});
    }
  }, period);
})();
