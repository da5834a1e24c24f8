// jethook dashboard: the Events page's search shows each event as soon as
// it is found, the scan's progress as it goes, and a Stop button. The
// server sends its results as lines of JSON (application/x-ndjson) whose
// HTML its templates escaped; error messages are inserted as textContent.
// Without this script the search form loads the page, which comes when
// the search ends.
"use strict";

let running = null; // the AbortController of the search streaming now

// fragment parses HTML the server escaped, in a <template> so that a lone
// <tr> stays a row.
function fragment(html) {
  const t = document.createElement("template");
  t.innerHTML = html;
  return t.content;
}

function searchURL(form) {
  const q = new URLSearchParams();
  for (const [k, v] of new FormData(form)) {
    if (v !== "" && !(k === "order" && v === "newest")) q.append(k, v);
  }
  const s = q.toString();
  return "/events" + (s ? "?" + s : "");
}

function setStatus(results, text) {
  const span = results.querySelector(".scan-text");
  if (span) span.textContent = text;
}

// finish ends a search on the page: state is done, stopped or failed.
function finish(results, state) {
  results.dataset.state = state;
  const stop = results.querySelector(".stop");
  if (stop) stop.remove();
}

async function streamSearch(url) {
  if (running) running.abort();
  const ctl = new AbortController();
  running = ctl;
  let results = document.getElementById("results");
  let state = "failed";
  results.dataset.state = "searching";
  setStatus(results, "Searching…");
  results.querySelector("tbody").replaceChildren();
  try {
    const res = checkSession(await fetch(url, {
      credentials: "same-origin", signal: ctl.signal,
      headers: { "Accept": "application/x-ndjson, application/json" },
    }));
    if (!res.ok) {
      let msg = res.statusText;
      try { msg = (await res.json()).message || msg; } catch (e) { /* not JSON */ }
      setStatus(results, "The search failed: " + msg);
      return;
    }
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += value;
      let nl;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = JSON.parse(buf.slice(0, nl));
        buf = buf.slice(nl + 1);
        results = show(results, line, ctl);
        if (line.end) state = "done";
      }
    }
  } catch (e) {
    if (ctl.signal.aborted) {
      state = "stopped";
      if (running === ctl) {
        const text = results.querySelector(".scan-text").textContent;
        setStatus(results, "Stopped." + (text.startsWith("Scanned") ? " " + text : ""));
      }
    } else {
      setStatus(results, "The search failed: " + e.message);
    }
  } finally {
    if (running === ctl) {
      running = null;
      finish(results, state);
    }
  }
}

// show applies one line of a streamed search and returns the results
// element, which the first line replaces.
function show(results, line, ctl) {
  if (line.results) {
    const next = fragment(line.results).firstElementChild;
    results.replaceWith(next);
    next.querySelector(".stop").addEventListener("click", () => ctl.abort());
    return next;
  }
  if (line.row) {
    results.querySelector("tbody").append(fragment(line.row));
  } else if (line.scan) {
    results.querySelector(".scan-text").replaceChildren(fragment(line.scan));
  } else if (line.end) {
    results.querySelector(".scan-text").replaceChildren(fragment(line.end));
    if (!line.found) {
      results.querySelector("table").hidden = true;
      results.querySelector(".none").hidden = false;
    }
    if (line.more) results.append(fragment(line.more));
  } else if (line.error) {
    setStatus(results, line.error);
  }
  return results;
}

document.addEventListener("DOMContentLoaded", () => {
  const form = document.getElementById("search");
  if (!form || !window.fetch || !window.TextDecoderStream) return;
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const url = searchURL(form);
    history.pushState(null, "", url);
    streamSearch(url);
  });
  document.addEventListener("click", (ev) => {
    const more = ev.target.closest("#more");
    if (!more) return;
    ev.preventDefault();
    const url = more.getAttribute("href");
    more.parentElement.remove();
    history.pushState(null, "", url);
    streamSearch(url);
  });
  window.addEventListener("popstate", () => location.reload());
});
