// jethook dashboard: live refresh of the overview, replay of everything
// matching a filter with progress, and select-all. Served as a file: the
// Content-Security-Policy allows no inline script. Everything the server
// sends is inserted as parsed HTML it escaped, or as textContent.
"use strict";

function csrf() {
  const m = document.querySelector('meta[name="csrf"]');
  return m ? m.content : "";
}

// A request whose session ended lands on the login page: go there.
function checkSession(res) {
  if (res.redirected && new URL(res.url).pathname === "/login") {
    location.assign(res.url);
    throw new Error("session ended");
  }
  return res;
}

function startRefresh(live) {
  const every = Math.max(1000, parseInt(live.dataset.refresh, 10) || 5000);
  let busy = false;
  setInterval(async () => {
    if (busy || document.visibilityState !== "visible") return;
    busy = true;
    try {
      const res = checkSession(await fetch(location.href, { credentials: "same-origin" }));
      if (!res.ok) return;
      const doc = new DOMParser().parseFromString(await res.text(), "text/html");
      const next = doc.querySelector(".live");
      const current = document.querySelector(".live");
      if (next && current) current.replaceWith(document.adoptNode(next));
    } catch (e) {
      // Keep showing the last page; the next tick tries again.
    } finally {
      busy = false;
    }
  }, every);
}

async function replayAll(form, ev) {
  ev.preventDefault();
  const button = form.querySelector("button");
  const bar = form.querySelector("progress");
  const text = form.querySelector(".progress-text");
  const total = parseInt(form.dataset.count, 10) || 0;
  button.disabled = true;
  bar.hidden = false;
  let queued = 0, skipped = 0, cursor = "";
  try {
    do {
      const body = new URLSearchParams(new FormData(form));
      if (cursor) body.set("cursor", cursor);
      const res = checkSession(await fetch(form.action, {
        method: "POST", credentials: "same-origin", body,
        headers: { "Accept": "application/json", "X-CSRF-Token": csrf() },
      }));
      const got = await res.json();
      if (!res.ok) throw new Error(got.message || res.statusText);
      queued += got.queued; skipped += got.skipped_duplicates;
      bar.value = Math.min(queued + skipped, total);
      text.textContent = "Replayed " + (queued + skipped) + " of " + total;
      cursor = got.next_cursor || "";
    } while (cursor);
    text.textContent = "Done: queued " + queued + ", skipped " + skipped + " already replayed.";
  } catch (e) {
    text.textContent = "Stopped after " + (queued + skipped) + ": " + e.message;
  } finally {
    button.disabled = false;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  const live = document.querySelector(".live[data-refresh]");
  if (live) startRefresh(live);
  document.querySelectorAll("form[data-replay-all]").forEach((f) => {
    f.addEventListener("submit", (ev) => replayAll(f, ev));
  });
  document.querySelectorAll("input[data-select-all]").forEach((all) => {
    all.addEventListener("change", () => {
      all.form.querySelectorAll('input[name="seq"]').forEach((c) => { c.checked = all.checked; });
    });
  });
  document.querySelectorAll("select[data-autosubmit]").forEach((s) => {
    s.addEventListener("change", () => s.form.submit());
  });
});
