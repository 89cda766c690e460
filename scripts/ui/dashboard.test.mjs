// Drives the dashboard like a user, in headless Chromium (Debian's) with
// playwright-core. Reads its inputs as JSON from argv[2]:
//   {base, token, admin, shots, known: {id, ids, mask}, stuck: [ids], group}
// and prints one JSON line: {ok, checks: [...], error?}. Screenshots of
// each page go to shots/.
import { chromium } from "playwright-core";

const cfg = JSON.parse(process.argv[2]);
const checks = [];
function check(name, ok, detail) {
  checks.push({ name, ok: !!ok, detail });
  if (!ok) throw new Error(`${name}: ${JSON.stringify(detail)}`);
}

const browser = await chromium.launch({ executablePath: cfg.chromium || "/usr/bin/chromium", headless: true, args: ["--no-sandbox"] });
const consoleErrors = [];
const external = [];
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.on("console", m => { if (m.type() === "error") consoleErrors.push(m.text()); });
  page.on("request", r => { if (!r.url().startsWith(cfg.base)) external.push(r.url()); });

  // Overview: the page asks for the token, then goes live.
  await page.goto(cfg.base + "/ui#/");
  await page.waitForSelector("#token-dialog[open]", { timeout: 10000 });
  check("asks for the token", true);
  await page.fill("#token-input", cfg.token);
  await page.click("#token-form button");
  await page.waitForSelector("#c-finished", { timeout: 10000 });
  const finished0 = Number(await page.textContent("#c-finished .v"));
  check("overview shows finished rollouts", finished0 >= cfg.finishedAtLeast, { finished0 });
  await page.waitForSelector("#live:has-text('live')");
  await page.waitForFunction(n => Number(document.querySelector("#c-stuck .v")?.textContent) >= n, cfg.stuck.length, { timeout: 10000 });
  check("overview counts the stuck rollouts", true);
  check("overview shows the health checks", (await page.$$("#health tbody tr")).length === 4, {});
  await page.screenshot({ path: cfg.shots + "/overview.png", fullPage: true });
  const backendsText = await page.textContent("#backends");
  check("overview lists the backend", backendsText.includes(cfg.backend), backendsText.slice(0, 200));

  // Rollouts: filter, stuck flags.
  await page.goto(cfg.base + "/ui#/rollouts?stuck_after=1s");
  await page.waitForSelector("#rollouts tbody tr");
  await page.fill("#filter", cfg.group);
  const groups = await page.$$eval("#rollouts tbody tr", trs => trs.map(tr => tr.children[4].textContent));
  check("filter keeps only the group", groups.length > 0 && groups.every(g => g === cfg.group), groups);
  await page.fill("#filter", "");
  await page.selectOption("#status-filter", "stuck");
  const stuckIDs = await page.$$eval("#rollouts tbody tr.stuck", trs => trs.map(tr => tr.dataset.id));
  check("stuck rollouts are flagged", cfg.stuck.every(id => stuckIDs.includes(id)), { stuckIDs, want: cfg.stuck });
  // Their task's first group finished before they were sent: the host
  // expects them to generate what it did (learned_tokens).
  const expected = await page.$$eval("#rollouts tbody tr.stuck", trs => trs.map(tr => tr.children[6].textContent));
  check("stuck rollouts show the tokens learned from the first group", expected.length > 0 && expected.every(x => /^[1-9]\d* \(learned\)$/.test(x)), expected);
  await page.screenshot({ path: cfg.shots + "/rollouts.png", fullPage: true });

  // Cancel needs the admin token.
  const row = `#rollouts tbody tr[data-id="${cfg.stuck[0]}"]`;
  await page.click(`${row} button.cancel`);
  await page.waitForSelector("#cancel-msg:has-text('admin token')");
  check("cancel without the admin token is refused", true);
  await page.click("#token-btn");
  await page.fill("#token-input", cfg.token);
  await page.fill("#admin-input", cfg.admin);
  await page.click("#token-form button");
  await page.goto(cfg.base + "/ui#/rollouts?stuck_after=1s");
  await page.waitForSelector(`${row} button.cancel`);
  await page.click(`${row} button.cancel`);
  await page.waitForSelector("#cancel-msg:has-text('cancelled 1')");
  check("cancel with the admin token", true);

  // The overview updates by itself (the cancel finished a rollout).
  await page.goto(cfg.base + "/ui#/");
  await page.waitForFunction(n => Number(document.querySelector("#c-finished .v")?.textContent) > n, finished0, { timeout: 15000 });
  check("overview updates live", true);

  // The viewer shows the known trajectory's tokens, mask and turns.
  await page.goto(cfg.base + "/ui#/rollouts/" + encodeURIComponent(cfg.known.id));
  await page.waitForSelector("#token-view .tok");
  const toks = await page.$$eval("#token-view .tok", s => s.map(x => [Number(x.dataset.id), Number(x.dataset.mask)]));
  check("viewer tokens are the trajectory's", JSON.stringify(toks.map(t => t[0])) === JSON.stringify(cfg.known.ids), { got: toks.length, want: cfg.known.ids.length });
  check("viewer loss mask is the trajectory's", JSON.stringify(toks.map(t => t[1])) === JSON.stringify(cfg.known.mask), {});
  const seps = await page.$$eval("#token-view .turn-sep", s => s.length);
  check("viewer marks turn starts", seps === cfg.known.turns - 1, { seps });
  const wf = await page.$$eval("#waterfall .row", r => r.length);
  check("viewer shows the timing waterfall", wf >= 3, { wf });
  const msgs = await page.$$eval("#messages .msg", m => m.length);
  check("viewer shows the messages", msgs >= 2, { msgs });
  await page.screenshot({ path: cfg.shots + "/viewer.png", fullPage: true });

  // Backends and plugins pages.
  await page.goto(cfg.base + "/ui#/backends");
  await page.waitForSelector("#backends tbody tr");
  check("backends page lists the backend", (await page.textContent("#backends")).includes(cfg.backend), {});
  await page.goto(cfg.base + "/ui#/plugins");
  await page.waitForSelector("#plugins tbody tr");
  check("plugins page shows math running", /math\s*running/.test(await page.textContent("#plugins")), await page.textContent("#plugins"));
  await page.screenshot({ path: cfg.shots + "/plugins.png", fullPage: true });
  // The cancelled rollout shows over time.
  await page.goto(cfg.base + "/ui#/");
  // A bar with height: buckets with only completed rollouts are empty bars.
  await page.waitForFunction(() => [...document.querySelectorAll("#failures-over-time .bars div")].some(d => d.offsetHeight > 0), null, { timeout: 15000 });
  check("failures over time show the cancel", true);

  // Unknown ids: a not-found page.
  await page.goto(cfg.base + "/ui#/rollouts/no-such-rollout");
  await page.waitForSelector("#not-found");
  check("unknown id shows not found", true);
  await page.screenshot({ path: cfg.shots + "/notfound.png", fullPage: true });

  check("nothing fetched from elsewhere", external.length === 0, external);
  // Statuses the flows above ask for (401 before the token, 403 cancelling
  // as a user, 404 for the unknown id) are expected; nothing else is.
  check("no console errors", consoleErrors.filter(e => !/status of (401|403|404)/.test(e)).length === 0, consoleErrors);
  const stored = await page.evaluate(() => document.documentElement.outerHTML);
  check("the page never shows a token", !stored.includes(cfg.token) && !stored.includes(cfg.admin), {});
  console.log(JSON.stringify({ ok: true, checks }));
} catch (e) {
  console.log(JSON.stringify({ ok: false, checks, error: String(e && e.message || e), console: consoleErrors }));
  process.exitCode = 1;
} finally {
  await browser.close();
}
