// Follows the host's result stream with Chromium's own EventSource (the
// reference SSE client) across a host restart. Reads {base, first, total}
// from argv[2]; prints a JSON line {got} once `first` results arrived,
// waits for a line on stdin (the test restarted the host and submitted
// more), then prints {got, opens, errors} once `total` arrived and a
// moment passed for any result sent twice. On failure: {error}.
import { chromium } from "playwright-core";
import readline from "node:readline";

const cfg = JSON.parse(process.argv[2]);
const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const browser = await chromium.launch({ executablePath: cfg.chromium || "/usr/bin/chromium", headless: true, args: ["--no-sandbox"] });
try {
  const page = await browser.newPage();
  await page.goto(cfg.base + "/healthz"); // the host's origin: EventSource is same-origin here
  await page.evaluate(() => {
    window.got = [];
    window.opens = 0;
    window.errors = 0;
    const es = new EventSource("/v1/results/stream?since=0");
    es.addEventListener("result", e => window.got.push({ event_id: e.lastEventId, id: JSON.parse(e.data).id }));
    es.onopen = () => window.opens++;
    es.onerror = () => window.errors++;
  });
  const state = () => page.evaluate(() => ({ got: window.got, opens: window.opens, errors: window.errors }));
  await page.waitForFunction(n => window.got.length >= n, cfg.first, { timeout: 60000 });
  console.log(JSON.stringify(await state()));
  if ((await lines.next()).done) throw new Error("stdin closed before the test went on");
  await page.waitForFunction(n => window.got.length >= n, cfg.total, { timeout: 60000 });
  await page.waitForTimeout(1500);
  console.log(JSON.stringify(await state()));
} catch (e) {
  console.log(JSON.stringify({ error: String(e) }));
} finally {
  await browser.close();
}
