// The dashboard's script: the project's own, and optional (every page works without it).
// 1. A sign-in link (/ui/login#ticket=…) carries its ticket in the fragment, which the
//    browser never sends: post it, and take it out of the address bar and the history.
// 2. A region marked data-refresh="N" is fetched again every N seconds and replaced, so the
//    workloads table stays current without losing the filter (it is in the address).
// 3. A table.sortable sorts the rows of the page shown by a column (a button in its header).
"use strict";

(function () {
  function signInWithTicket() {
    var form = document.getElementById("sign-in");
    var prefix = "#ticket=";
    if (!form || location.hash.indexOf(prefix) !== 0) return;
    document.getElementById("ticket").value = decodeURIComponent(location.hash.slice(prefix.length));
    history.replaceState(null, "", location.pathname + location.search);
    form.submit();
  }

  var sorted = null; // {column, descending}: re-applied after a refresh

  function cellValue(row, column) {
    var cell = row.cells[column];
    if (!cell) return "";
    var key = cell.getAttribute("data-sort");
    return key !== null ? Number(key) : cell.textContent.trim().toLowerCase();
  }

  function sortTable(table, column, descending) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    if (rows.length < 2) return;
    rows.sort(function (a, b) {
      var x = cellValue(a, column), y = cellValue(b, column);
      var order = x < y ? -1 : x > y ? 1 : 0;
      return descending ? -order : order;
    });
    rows.forEach(function (row) { body.appendChild(row); });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, index) {
      if (index === column) th.setAttribute("aria-sort", descending ? "descending" : "ascending");
      else th.removeAttribute("aria-sort");
    });
  }

  function makeSortable(root) {
    Array.prototype.forEach.call(root.querySelectorAll("table.sortable"), function (table) {
      Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, column) {
        var button = document.createElement("button");
        button.type = "button";
        button.className = "sort";
        button.textContent = th.textContent;
        button.setAttribute("aria-label", "Sort this page by " + th.textContent);
        th.textContent = "";
        th.appendChild(button);
        button.addEventListener("click", function () {
          var descending = sorted !== null && sorted.column === column ? !sorted.descending : false;
          sorted = {column: column, descending: descending};
          sortTable(table, column, descending);
        });
      });
      if (sorted !== null) sortTable(table, sorted.column, sorted.descending);
    });
  }

  function keepFresh(region) {
    var seconds = Number(region.getAttribute("data-refresh")) || 5;
    window.setInterval(function () {
      if (document.visibilityState !== "visible" || region.contains(document.activeElement)) return;
      fetch(location.href, {credentials: "same-origin", cache: "no-store"})
        .then(function (answer) {
          if (!answer.ok || answer.redirected) return null; // signed out: leave the page be
          return answer.text();
        })
        .then(function (html) {
          if (html === null) return;
          var fresh = new DOMParser().parseFromString(html, "text/html").getElementById(region.id);
          if (!fresh) return;
          region.innerHTML = fresh.innerHTML;
          makeSortable(region);
          region.setAttribute("data-refreshed", String(Date.now()));
        })
        .catch(function () { /* the server is away: try again at the next tick */ });
    }, seconds * 1000);
  }

  document.addEventListener("DOMContentLoaded", function () {
    signInWithTicket();
    makeSortable(document);
    Array.prototype.forEach.call(document.querySelectorAll("[data-refresh]"), keepFresh);
  });
})();
