// Ostinato web UI, the one script (the CSP allows no other, and no inline script):
// - live regions: an element with data-live="<url>" is refreshed every data-every seconds from
//   that url, asked for as a fragment (header X-UI-Fragment), while the tab is visible;
// - times: <time data-when datetime="ISO"> (macro `when`) shown relative ("3 min ago"), the
//   absolute time on hover in UTC or this browser's zone (the header's toggle, remembered in
//   localStorage); without script the server's UTC text stays;
// - ids: button.copy[data-copy] (macro `id`) copies the full id to the clipboard;
// - button.danger asks before it submits;
// - textarea[data-json] (an action's JSON payload or output) is parsed as it is typed: the parse
//   error is shown in the element its aria-describedby names, and the form's submit button is
//   disabled while any of its JSON fields is invalid (empty is valid: null); the server checks
//   again.
// No framework, nothing fetched from anywhere but this server.
(function () {
  "use strict";

  var ZONE_KEY = "ostinato.times";  // "utc" (the default) or "local"

  function zone() {
    try { return window.localStorage.getItem(ZONE_KEY) === "local" ? "local" : "utc"; }
    catch (e) { return "utc"; }
  }

  function pad(n) { return (n < 10 ? "0" : "") + n; }

  function absolute(date, where) {
    if (where === "utc") { return date.toISOString().slice(0, 19).replace("T", " ") + " UTC"; }
    var name = "";
    try { name = Intl.DateTimeFormat().resolvedOptions().timeZone || ""; } catch (e) { name = ""; }
    return date.getFullYear() + "-" + pad(date.getMonth() + 1) + "-" + pad(date.getDate()) +
      " " + pad(date.getHours()) + ":" + pad(date.getMinutes()) + ":" + pad(date.getSeconds()) +
      " " + (name || "local");
  }

  // "3 min ago", "in 2 h"; beyond 30 days the absolute time itself
  function relative(date, now, where) {
    var delta = date.getTime() - now, s = Math.round(Math.abs(delta) / 1000), text;
    if (s < 5) { return delta <= 0 ? "just now" : "in a moment"; }
    if (s < 60) { text = s + " s"; }
    else if (s < 3600) { text = Math.floor(s / 60) + " min"; }
    else if (s < 86400) {
      text = Math.floor(s / 3600) + " h" + (s % 3600 >= 60 ? " " + Math.floor(s % 3600 / 60) + " min" : "");
    } else if (s < 30 * 86400) { text = Math.floor(s / 86400) + " d"; }
    else { return absolute(date, where); }
    return delta <= 0 ? text + " ago" : "in " + text;
  }

  function showTimes(root) {
    var where = zone(), now = Date.now();
    root.querySelectorAll("time[data-when]").forEach(function (el) {
      var date = new Date(el.getAttribute("datetime"));
      if (isNaN(date.getTime())) { return; }
      el.textContent = relative(date, now, where);
      el.title = absolute(date, where);
    });
    var toggle = document.querySelector("[data-zone-toggle]");
    if (toggle && document.querySelector("time[data-when]")) {  // offered where times are
      toggle.hidden = false;
      toggle.textContent = where === "utc" ? "times: UTC" : "times: local";
      toggle.setAttribute("aria-pressed", where === "local" ? "true" : "false");
    }
  }

  function toggleZone() {
    try { window.localStorage.setItem(ZONE_KEY, zone() === "utc" ? "local" : "utc"); }
    catch (e) { return; }
    showTimes(document);
  }

  function copied(button) {  // its label is the stylesheet's (not in a row's text)
    button.classList.add("copied");
    window.setTimeout(function () { button.classList.remove("copied"); }, 1500);
  }

  function copy(button) {
    var text = button.dataset.copy;
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(function () { copied(button); },
        function () { copyBySelection(button, text); });
    } else {
      copyBySelection(button, text);
    }
  }

  function copyBySelection(button, text) {  // a page served over plain http to another host
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.className = "offscreen";
    document.body.appendChild(area);
    area.select();
    try { if (document.execCommand("copy")) { copied(button); } } finally { area.remove(); }
  }

  function refresh(region) {
    // hidden, or an action of the region's open (its reason typed): not redrawn under it
    if (document.hidden || region.querySelector("details.action[open]")) {
      return Promise.resolve();
    }
    return fetch(region.dataset.live, {
      headers: { "X-UI-Fragment": "1" }, credentials: "same-origin", cache: "no-store"
    }).then(function (response) {
      if (response.status === 401) { window.location.reload(); return null; }
      if (!response.ok) { throw new Error("HTTP " + response.status); }
      return response.text();
    }).then(function (text) {
      if (text === null) { return; }
      region.innerHTML = text;  // the server escaped every value in it
      showTimes(region);
      region.classList.remove("stale");
      region.dataset.updated = new Date().toISOString();
    }).catch(function () {
      region.classList.add("stale");  // keep the last rows; try again on the next tick
    });
  }

  function start(region) {
    var seconds = Math.max(1, parseInt(region.dataset.every || "3", 10));
    window.setInterval(function () { refresh(region); }, seconds * 1000);
  }

  function confirmForms() {
    document.querySelectorAll("button.danger").forEach(function (button) {
      button.addEventListener("click", function (event) {
        if (!window.confirm(button.textContent + "?")) { event.preventDefault(); }
      });
    });
  }

  function jsonError(area) {
    var text = area.value.trim();
    if (!text) { return ""; }
    try { JSON.parse(text); return ""; } catch (e) { return "Not JSON: " + e.message; }
  }

  function checkJson(area) {
    var error = jsonError(area), note = document.getElementById(area.getAttribute("aria-describedby") || "");
    if (note) { note.textContent = error; }
    if (error) { area.setAttribute("aria-invalid", "true"); } else { area.removeAttribute("aria-invalid"); }
    var form = area.form, bad = false;
    if (!form) { return; }
    form.querySelectorAll("textarea[data-json]").forEach(function (a) { bad = bad || !!jsonError(a); });
    form.querySelectorAll("button[type=submit]").forEach(function (b) { b.disabled = bad; });
  }

  document.addEventListener("input", function (event) {
    if (event.target.matches && event.target.matches("textarea[data-json]")) { checkJson(event.target); }
  });

  document.addEventListener("click", function (event) {
    var button = event.target.closest ? event.target.closest("button.copy[data-copy]") : null;
    if (button) { event.preventDefault(); copy(button); return; }
    if (event.target.closest && event.target.closest("[data-zone-toggle]")) { toggleZone(); }
  });

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-live]").forEach(start);
    confirmForms();
    document.querySelectorAll("textarea[data-json]").forEach(checkJson);
    showTimes(document);
    window.setInterval(function () { showTimes(document); }, 30000);
  });
}());
