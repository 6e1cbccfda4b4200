// Drives vtc's web chat (GET /, serve/webui/index.html) in headless Chromium
// over the Chrome DevTools Protocol, spoken on --remote-debugging-pipe (fd 3
// in, fd 4 out, NUL-terminated JSON), so no npm package is needed.
//
//   node webui_browser.mjs CHROMIUM ORIGIN API_KEY SCREENSHOT_PNG
//
// Checks, in the browser: the page's headers (HTML, a CSP that blocks
// foreign loads, and a probe that the CSP really blocks one); no request
// leaves the server's origin; a chat turn streams (several partial repaints)
// and ends with the text the server gives the same request unstreamed; Stop
// aborts a long generation and the server's /metrics counts it cancelled;
// reasoning_content and tool_calls deltas render (a canned OpenAI stream,
// fulfilled through the Fetch domain). Saves a screenshot. Exit 77 only
// when Chromium cannot be started.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [chromiumPath, origin, apiKey, screenshotPath] = process.argv.slice(2);
let phase = "starting Chromium";
const fail = (message) => {
  throw new Error(message);
};
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// ---- A minimal CDP client over the pipe ------------------------------------
class Cdp {
  constructor(child) {
    this.toBrowser = child.stdio[3];
    this.nextId = 1;
    this.pending = new Map();
    this.handlers = [];
    let buffer = "";
    child.stdio[4].on("data", (bytes) => {
      buffer += bytes.toString("utf8");
      let end;
      while ((end = buffer.indexOf("\0")) >= 0) {
        const message = JSON.parse(buffer.slice(0, end));
        buffer = buffer.slice(end + 1);
        this.dispatch(message);
      }
    });
  }
  dispatch(message) {
    if (message.id !== undefined) {
      const waiter = this.pending.get(message.id);
      this.pending.delete(message.id);
      if (!waiter) return;
      if (message.error) waiter.reject(new Error(`${waiter.method}: ${message.error.message}`));
      else waiter.resolve(message.result);
      return;
    }
    for (const handler of this.handlers) handler(message.method, message.params, message.sessionId);
  }
  send(method, params = {}, sessionId = undefined) {
    const id = this.nextId++;
    const message = { id, method, params };
    if (sessionId) message.sessionId = sessionId;
    this.toBrowser.write(JSON.stringify(message) + "\0");
    return new Promise((resolve, reject) => this.pending.set(id, { resolve, reject, method }));
  }
  on(handler) {
    this.handlers.push(handler);
  }
}

async function startChromium() {
  const profile = mkdtempSync(join(tmpdir(), "vtc-webui-chromium-"));
  const args = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--remote-debugging-pipe",
    `--user-data-dir=${profile}`, "--no-first-run", "--no-default-browser-check", "--disable-extensions",
    "--disable-background-networking", "--disable-component-update", "--disable-sync", "--mute-audio",
    "--window-size=1100,900", "about:blank",
  ];
  const child = spawn(chromiumPath, args, { stdio: ["ignore", "ignore", "pipe", "pipe", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (b) => (stderr = (stderr + b.toString()).slice(-2000)));
  // A browser that never starts (or dies) shows up as the exit below; its
  // pipes then fail with EPIPE, which is that same failure.
  const exited = new Promise((resolve) => {
    child.on("exit", (code, signal) => resolve(`exited (${signal || code})`));
    child.on("error", (e) => resolve(`failed to run (${e.message})`));
  });
  for (const pipe of [child.stdio[3], child.stdio[4]]) pipe?.on("error", () => {});
  const cdp = new Cdp(child);
  const started = await Promise.race([
    cdp.send("Browser.getVersion").then((v) => v),
    exited,
    sleep(20000).then(() => "gave no DevTools answer in 20 s"),
  ]);
  if (typeof started === "string") {
    child.kill("SIGKILL");
    rmSync(profile, { recursive: true, force: true });
    console.log(`SKIPPED: Chromium (${chromiumPath}) could not be started: it ${started}. ${stderr.trim()}`);
    process.exit(77);
  }
  console.log(`browser: ${started.product}`);
  const close = async () => {
    await Promise.race([cdp.send("Browser.close").catch(() => {}), sleep(3000)]);
    child.kill("SIGKILL");
    await exited;
    try {
      rmSync(profile, { recursive: true, force: true, maxRetries: 5, retryDelay: 100 });
    } catch {
      /* a profile left in the temp folder is no failure */
    }
  };
  return { cdp, close };
}

// ---- The server, from node (the reference the page is checked against) ---
const auth = { Authorization: `Bearer ${apiKey}` };
async function cancelledCount() {
  const res = await fetch(`${origin}/metrics`, { headers: auth });
  if (!res.ok) fail(`/metrics answered ${res.status}`);
  const m = (await res.text()).match(/^vtc_finished_total\{reason="cancelled"\} (\d+)$/m);
  return m ? Number(m[1]) : 0;
}

// ---- The test ------------------------------------------------------------
async function main() {
  for (let i = 0; i < 400; i++) {
    const health = await fetch(`${origin}/health`).catch(() => null);
    if (health && health.ok) break;
    await sleep(50);
  }
  const { cdp, close } = await startChromium();
  try {
    await run(cdp);
  } finally {
    await close();
  }
}

async function run(cdp) {
  const { targetId } = await cdp.send("Target.createTarget", { url: "about:blank" });
  const { sessionId } = await cdp.send("Target.attachToTarget", { targetId, flatten: true });
  const page = (method, params) => cdp.send(method, params, sessionId);

  const requests = [];  // {url, method, postData, headers}
  let documentResponse = null;
  const problems = [];  // script exceptions and console errors other than network ones
  let loaded = null;
  const fulfil = new Map();  // URL suffix -> canned SSE body (Fetch domain)
  cdp.on((method, params, from) => {
    if (from !== sessionId) return;
    if (method === "Network.requestWillBeSent") requests.push(params.request);
    if (method === "Network.responseReceived" && params.type === "Document") documentResponse = params.response;
    if (method === "Runtime.exceptionThrown") problems.push(`exception: ${params.exceptionDetails.exception?.description || params.exceptionDetails.text}`);
    if (method === "Log.entryAdded" && params.entry.level === "error" && params.entry.source !== "network")
      problems.push(`${params.entry.source}: ${params.entry.text}`);
    if (method === "Page.loadEventFired" && loaded) loaded();
    if (method === "Fetch.requestPaused") {
      const body = [...fulfil.entries()].find(([suffix]) => params.request.url.endsWith(suffix));
      if (!body) page("Fetch.continueRequest", { requestId: params.requestId });
      else
        page("Fetch.fulfillRequest", {
          requestId: params.requestId, responseCode: 200,
          responseHeaders: [{ name: "Content-Type", value: "text/event-stream" }],
          body: Buffer.from(body[1]).toString("base64"),
        });
    }
  });
  await Promise.all([page("Page.enable"), page("Network.enable"), page("Runtime.enable"), page("Log.enable")]);

  const evaluate = async (expression) => {
    const r = await page("Runtime.evaluate", { expression, returnByValue: true, awaitPromise: true });
    if (r.exceptionDetails) fail(`page script failed: ${r.exceptionDetails.exception?.description || r.exceptionDetails.text}\n${expression}`);
    return r.result.value;
  };
  // Polls until `expression` is truthy (a guard against hangs, not a timing check).
  const waitFor = async (expression, what, seconds = 20) => {
    for (const end = Date.now() + seconds * 1000; Date.now() < end; await sleep(25)) {
      const v = await evaluate(expression);
      if (v) return v;
    }
    fail(`timed out waiting for ${what}`);
  };
  const typeInto = async (selector, text) => {
    await evaluate(`(() => { const e = document.querySelector(${JSON.stringify(selector)}); e.focus(); e.select(); })()`);
    await page("Input.insertText", { text });
  };
  const clickWithMouse = async (selector) => {
    const box = await evaluate(`(() => { const r = document.querySelector(${JSON.stringify(selector)}).getBoundingClientRect();
      return {x: r.x + r.width / 2, y: r.y + r.height / 2}; })()`);
    for (const type of ["mousePressed", "mouseReleased"])
      await page("Input.dispatchMouseEvent", { type, x: box.x, y: box.y, button: "left", clickCount: 1 });
  };
  const pressEnter = async () => {
    for (const type of ["keyDown", "keyUp"])
      await page("Input.dispatchKeyEvent", { type, key: "Enter", code: "Enter", windowsVirtualKeyCode: 13 });
  };
  const lastAssistant = `document.querySelector("#messages li.assistant:last-of-type")`;

  // 1. The page loads, from the server's origin only, with its headers.
  phase = "loading the page";
  const load = new Promise((resolve) => (loaded = resolve));
  await page("Page.navigate", { url: `${origin}/` });
  await load;
  await waitFor(`document.body.dataset.state === "idle"`, "the page's script to start");
  if (!documentResponse || documentResponse.status !== 200) fail(`GET / answered ${documentResponse?.status}`);
  const header = (name) => Object.entries(documentResponse.headers).find(([k]) => k.toLowerCase() === name)?.[1] || "";
  if (!header("content-type").startsWith("text/html")) fail(`GET /: Content-Type ${header("content-type")}`);
  const csp = header("content-security-policy");
  if (!csp.includes("default-src 'none'") || !csp.includes("connect-src 'self'")) fail(`GET /: CSP is '${csp}'`);
  if (!header("etag") || !header("cache-control")) fail("GET /: no ETag or Cache-Control");
  const revalidated = await fetch(`${origin}/`, { headers: { "If-None-Match": header("etag") } });
  if (revalidated.status !== 304) fail(`GET / with If-None-Match: its ETag answered ${revalidated.status}, not 304`);
  console.log(`GET / without the API key: 200 ${header("content-type")}, CSP ${csp}`);

  // 2. Settings: the key, greedy sampling, a short answer.
  phase = "settings";
  await evaluate(`document.getElementById("toggle-settings").click()`);
  await waitFor(`!document.getElementById("settings").hidden`, "the settings panel to open");
  await typeInto("#api-key", apiKey);
  await typeInto("#temperature", "0");
  await typeInto("#max-tokens", "64");

  // 3. A chat turn streams into the page.
  phase = "first chat turn";
  await evaluate(`(() => {
    window.partialLengths = [];
    const list = document.getElementById("messages");
    new MutationObserver(() => {
      const c = list.querySelector("li.assistant:last-of-type .content");
      if (c) window.partialLengths.push(c.textContent.length);
    }).observe(list, { subtree: true, childList: true, characterData: true });
  })()`);
  // The tiny model answers in a fraction of a second; a browser that is
  // short of CPU could read the whole stream at once. Throttling the download
  // (16 KB/s: ~1 s for the ~13 KB of chunks) makes the bytes arrive in
  // pieces, so the count of repaints below depends on the page, not on load.
  const throttle = (bytesPerSecond) => page("Network.emulateNetworkConditions",
    { offline: false, latency: 0, downloadThroughput: bytesPerSecond, uploadThroughput: -1 });
  await throttle(16384);
  await typeInto("#prompt", "Hello! Who are you?");
  await pressEnter();
  await waitFor(`document.body.dataset.state === "idle" && ${lastAssistant}?.querySelector(".meta").textContent`, "the first answer to finish");
  const first = await evaluate(`({ text: ${lastAssistant}.querySelector(".content").textContent,
    meta: ${lastAssistant}.querySelector(".meta").textContent, partials: window.partialLengths })`);
  await throttle(-1);
  const sent = requests.find((r) => r.url === `${origin}/v1/chat/completions`);
  if (!sent) fail("the page sent no POST /v1/chat/completions");
  const sentBody = JSON.parse(sent.postData);
  if (sent.headers.Authorization !== `Bearer ${apiKey}`) fail("the page did not send the API key");
  if (sentBody.stream !== true || sentBody.temperature !== 0 || sentBody.max_tokens !== 64)
    fail(`the page sent ${sent.postData}`);
  // The same request unstreamed, from node: the page must show exactly its text.
  const reference = await fetch(`${origin}/v1/chat/completions`, {
    method: "POST", headers: { ...auth, "Content-Type": "application/json" },
    body: JSON.stringify({ ...sentBody, stream: false, stream_options: undefined }),
  }).then((r) => r.json());
  const expected = reference.choices[0].message.content;
  if (first.text !== expected) fail(`streamed text in the page differs from the server's answer:\npage:   ${JSON.stringify(first.text)}\nserver: ${JSON.stringify(expected)}`);
  const partial = new Set(first.partials.filter((n) => n > 0 && n < first.text.length));
  console.log(`first turn: ${first.text.length} chars in ${partial.size} partial repaints before the last (${first.meta}); equal to the unstreamed answer`);
  if (partial.size < 3) fail(`only ${partial.size} partial repaints before the end (lengths seen: ${first.partials.join(" ")}): the answer did not stream`);

  // 4. Stop: a long generation is aborted and the server cancels it.
  phase = "stopping a long generation";
  const cancelledBefore = await cancelledCount();
  await typeInto("#max-tokens", "3800");
  await typeInto("#prompt", "Now tell me a very long story.");
  await evaluate(`document.getElementById("send").click()`);
  await waitFor(`document.body.dataset.state === "generating" && ${lastAssistant}.querySelector(".content").textContent.length > 0`,
                "the long answer to start streaming");
  await clickWithMouse("#stop");
  await waitFor(`document.body.dataset.state === "idle"`, "the page to go idle after Stop");
  const stopped = await evaluate(`({ meta: ${lastAssistant}.querySelector(".meta").textContent,
    length: ${lastAssistant}.querySelector(".content").textContent.length })`);
  if (stopped.meta !== "stopped") fail(`after Stop the answer says '${stopped.meta}' (the generation ended before Stop?)`);
  let cancelledAfter = cancelledBefore;
  for (const end = Date.now() + 10000; Date.now() < end && cancelledAfter === cancelledBefore; await sleep(50))
    cancelledAfter = await cancelledCount();
  if (cancelledAfter !== cancelledBefore + 1)
    fail(`/metrics vtc_finished_total{reason="cancelled"} went ${cancelledBefore} -> ${cancelledAfter}, not +1`);
  console.log(`Stop after ${stopped.length} chars: /metrics vtc_finished_total{reason="cancelled"} ${cancelledBefore} -> ${cancelledAfter}`);

  // 5. Reasoning and tool calls render (a canned stream in OpenAI's format:
  // this tiny random model never emits either).
  phase = "reasoning and tool calls";
  const chunk = (delta, finish = null) =>
    `data: ${JSON.stringify({ id: "chatcmpl-canned", object: "chat.completion.chunk", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
  fulfil.set("/v1/chat/completions", [
    chunk({ role: "assistant", reasoning_content: "The user wants " }),
    chunk({ reasoning_content: "the weather." }),
    ": keep-alive\n\n",
    chunk({ content: "Let me check." }),
    chunk({ tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "get_weather", arguments: "{\"city\": " } }] }),
    chunk({ tool_calls: [{ index: 0, function: { arguments: "\"Paris\"}" } }] }),
    chunk({}, "tool_calls"),
    "data: [DONE]\n\n",
  ].join(""));
  await page("Fetch.enable", { patterns: [{ urlPattern: "*/v1/chat/completions", requestStage: "Request" }] });
  await typeInto("#prompt", "What is the weather in Paris?");
  await pressEnter();
  await waitFor(`document.body.dataset.state === "idle" && ${lastAssistant}.querySelector(".tool-call")`, "the tool call to render");
  await page("Fetch.disable");
  const shown = await evaluate(`(() => { const m = ${lastAssistant}; const d = m.querySelector("details.reasoning");
    return { reasoning: d.querySelector("pre").textContent, hidden: d.hidden, open: d.open,
             content: m.querySelector(".content").textContent, tool: m.querySelector(".tool-call .name").textContent,
             args: m.querySelector(".tool-call pre").textContent, meta: m.querySelector(".meta").textContent }; })()`);
  if (shown.reasoning !== "The user wants the weather." || shown.hidden || shown.open)
    fail(`reasoning block: ${JSON.stringify(shown)} (want it shown, collapsed)`);
  if (shown.content !== "Let me check." || shown.tool !== "Tool call: get_weather" || shown.args !== "{\"city\": \"Paris\"}")
    fail(`tool call: ${JSON.stringify(shown)}`);
  await evaluate(`${lastAssistant}.querySelector("details.reasoning summary").click()`);
  if (!(await evaluate(`${lastAssistant}.querySelector("details.reasoning").open`))) fail("the reasoning block does not expand");
  console.log(`reasoning (collapsible) and tool call rendered: ${shown.tool} ${shown.args} (${shown.meta})`);

  // 6. Screenshot, then: every request stayed on the server's origin.
  phase = "screenshot";
  const shot = await page("Page.captureScreenshot", { format: "png" });
  writeFileSync(screenshotPath, Buffer.from(shot.data, "base64"));
  console.log(`screenshot: ${screenshotPath}`);
  const foreign = requests.filter((r) => !r.url.startsWith(`${origin}/`) && !r.url.startsWith("data:"));
  if (foreign.length) fail(`requests outside ${origin}: ${foreign.map((r) => r.url).join(", ")}`);
  console.log(`${requests.length} requests, all to ${origin}: ${[...new Set(requests.map((r) => new URL(r.url).pathname))].join(" ")}`);
  if (problems.length) fail(`the page reported errors:\n${problems.join("\n")}`);

  // 7. The CSP is enforced: a fetch to another origin is refused.
  phase = "CSP probe";
  const violated = await evaluate(`new Promise((resolve) => {
    document.addEventListener("securitypolicyviolation", (e) => resolve(e.effectiveDirective), { once: true });
    fetch("http://192.0.2.1/probe").catch(() => {});
    setTimeout(() => resolve("none"), 5000);
  })`);
  if (violated !== "connect-src") fail(`a foreign fetch was not refused by the CSP (violation: ${violated})`);
  console.log("CSP refuses a foreign fetch (connect-src)");
}

const guard = setTimeout(() => {
  console.error(`FAIL: the browser test hung while ${phase}`);
  process.exit(1);
}, 90000);
main().then(
  () => {
    clearTimeout(guard);
    console.log("webui browser test: PASS");
  },
  (e) => {
    console.error(`FAIL while ${phase}: ${e.message}`);
    process.exit(1);
  },
);
