// A small server speaking vLLM's endpoints over a real inference engine:
// llama.cpp on CPU through node-llama-cpp. For end-to-end tests of token
// exactness: token-id prompts in; token ids ("token_id:N") and logprobs out.
//
//   node server.mjs --model M.gguf [--listen 127.0.0.1:0] [--addr-file F]
//                   [--log F.jsonl] [--grammar G.gbnf] [--slots N] [--token-delay-ms N]
//
// Endpoints: vLLM's POST /v1/completions (prompt as token ids, logprobs,
// return_tokens_as_token_ids), POST /tokenize {prompt}, POST /detokenize
// {tokens}, GET /health, GET /v1/models; and SGLang's native POST /generate
// (input_ids, sampling_params, return_logprob -> meta_info). With --grammar, sampling is
// constrained by a GBNF grammar (llama.cpp's own feature), so a random
// model still writes well-formed tool calls. Every request and response is
// appended to --log as a JSON line {path, request, response, status}.
// vLLM's generation pause: POST /pause?mode=abort|wait (abort ends the
// generations in flight, which answer finish_reason "abort" with their
// tokens so far; new ones wait until POST /resume), GET /is_paused.
// SGLang's, as its http_server and tokenizer_manager have them:
// POST /pause_generation {"mode": "abort"} (the same abort; SGLang's
// in_place and retract modes are not modelled here and answer 400),
// POST /continue_generation, and POST /abort_request {"abort_all": true}
// (aborts without pausing; a single rid is not modelled here). An aborted
// /generate answers finish_reason {"type": "abort", "status_code": null}
// with its tokens so far.
// --token-delay-ms slows each sampled token (a test knob: the tiny model
// generates faster than a test can pause it).
import { getLlama, LlamaGrammarEvaluationState } from 'node-llama-cpp';
import fs from 'node:fs';
import http from 'node:http';

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
if (!args.model) {
  console.error('usage: server.mjs --model M.gguf [--listen addr] [--addr-file F] [--log F] [--grammar G] [--slots N]');
  process.exit(2);
}
const slots = Number(args.slots || 2);
const modelName = 'prorl-tiny-llama';

const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'warn' });
const model = await llama.loadModel({ modelPath: args.model });
const vocabSize = model.fileInfo.metadata.tokenizer.ggml.tokens.length;
const context = await model.createContext({ contextSize: 4096, threads: 1, sequences: slots });
const free = [];
for (let i = 0; i < slots; i++) free.push(context.getSequence());
const waiting = [];
const acquire = () => (free.length ? Promise.resolve(free.pop()) : new Promise((r) => waiting.push(r)));
const release = (s) => (waiting.length ? waiting.shift()(s) : free.push(s));
const tokenDelay = Number(args['token-delay-ms'] || 0);
const grammar = args.grammar ? await llama.createGrammar({ grammar: fs.readFileSync(args.grammar, 'utf8') }) : null;
const logFile = args.log ? fs.openSync(args.log, 'a') : null;

class BadRequest extends Error {}

// The pause state (vLLM's /pause, /resume).
let paused = false;
let resumeWaiters = [];
let abortEpoch = 0;
let inflight = 0;
let drainWaiters = [];
const drained = () => (inflight === 0 ? Promise.resolve() : new Promise((r) => drainWaiters.push(r)));

async function pause(_req, query) {
  const mode = query.get('mode') || (query.get('wait_for_inflight_requests') === 'true' ? 'wait' : 'abort');
  need(mode === 'abort' || mode === 'wait', 'mode must be abort or wait (keep is not supported here)');
  paused = true;
  if (mode === 'abort') abortEpoch++;
  await drained();
  return { status: 'paused' };
}

// SGLang: POST /pause_generation.
async function sglangPause(req) {
  const mode = req.mode ?? 'abort';
  need(mode === 'abort', `mode ${JSON.stringify(mode)}: only abort is modelled here (SGLang also has in_place and retract)`);
  paused = true;
  abortEpoch++;
  await drained();
  return { message: 'Generation paused successfully.', status: 'ok' };
}

// SGLang: POST /abort_request.
async function sglangAbort(req) {
  need(req.abort_all === true, 'only abort_all is modelled here');
  abortEpoch++;
  return {};
}

async function resume() {
  paused = false;
  const w = resumeWaiters;
  resumeWaiters = [];
  w.forEach((r) => r());
  return { status: 'resumed' };
}

function need(cond, msg) {
  if (!cond) throw new BadRequest(msg);
}

// generate samples from the engine: token ids in, ids and logprobs out,
// ending at an end-of-generation token (reported, as vLLM and SGLang do),
// a stop string or max_tokens.
async function generate(prompt, p) {
  need(Array.isArray(prompt) && prompt.length > 0 && prompt.every(Number.isInteger), 'the prompt must be a non-empty list of token ids');
  need(prompt.every((t) => t >= 0 && t < vocabSize), 'the prompt has a token id outside the vocabulary');
  need(Number.isInteger(p.maxTokens) && p.maxTokens > 0, 'the maximum number of new tokens must be a positive integer');
  need(prompt.length + p.maxTokens <= 4096, "This model's maximum context length is 4096 tokens");
  while (paused) await new Promise((r) => resumeWaiters.push(r));
  inflight++;
  const epoch = abortEpoch;
  let seq = null;
  try {
    seq = await acquire();
    if (abortEpoch !== epoch) return { ids: [], lps: [], finish: 'abort', matched: null, text: '' };
    await seq.clearHistory();
    // yieldEogToken: the end-of-generation token the engine sampled is reported.
    const opts = { temperature: p.temperature ?? 1, topP: p.topP ?? 1, topK: p.topK > 0 ? p.topK : 0, yieldEogToken: true };
    if (p.seed != null) opts.seed = p.seed;
    if (grammar) opts.grammarEvaluationState = new LlamaGrammarEvaluationState({ model, grammar });
    const ids = [];
    const lps = [];
    let finish = 'length';
    let matched = null; // the end-of-generation token or stop string that ended it
    const stops = p.stop || [];
    for await (const r of seq.evaluateWithMetadata(prompt, { confidence: true }, opts)) {
      if (abortEpoch !== epoch) {
        finish = 'abort';
        break;
      }
      if (tokenDelay) await new Promise((res) => setTimeout(res, tokenDelay));
      ids.push(r.token);
      lps.push(Math.log(r.confidence));
      const stopped = model.isEogToken(r.token) ? r.token : stops.find((s) => model.detokenize(ids, true).endsWith(s));
      if (stopped !== undefined) {
        finish = 'stop';
        matched = stopped;
        break;
      }
      if (ids.length >= p.maxTokens) break;
    }
    return { ids, lps, finish, matched, text: model.detokenize(ids, !(p.skipSpecialTokens ?? true)) };
  } finally {
    if (seq) release(seq);
    if (--inflight === 0) {
      const w = drainWaiters;
      drainWaiters = [];
      w.forEach((r) => r());
    }
  }
}

// vLLM: POST /v1/completions.
async function completions(req) {
  const g = await generate(req.prompt, { maxTokens: req.max_tokens, temperature: req.temperature, topP: req.top_p,
    topK: req.top_k, seed: req.seed, stop: req.stop, skipSpecialTokens: req.skip_special_tokens });
  const tokens = req.return_tokens_as_token_ids ? g.ids.map((t) => `token_id:${t}`) : g.ids.map((t) => model.detokenize([t], true));
  return {
    id: `cmpl-${Date.now()}`, object: 'text_completion', created: Math.floor(Date.now() / 1000), model: modelName,
    choices: [{ index: 0, text: g.text, finish_reason: g.finish, stop_reason: null,
      logprobs: req.logprobs != null ? { tokens, token_logprobs: g.lps, top_logprobs: null, text_offset: [] } : null }],
    usage: { prompt_tokens: req.prompt.length, completion_tokens: g.ids.length, total_tokens: req.prompt.length + g.ids.length },
  };
}

// SGLang: POST /generate (native API).
async function sglangGenerate(req) {
  const sp = req.sampling_params || {};
  const g = await generate(req.input_ids, { maxTokens: sp.max_new_tokens, temperature: sp.temperature, topP: sp.top_p,
    topK: sp.top_k, seed: sp.sampling_seed, stop: sp.stop, skipSpecialTokens: sp.skip_special_tokens });
  // SGLang's FINISH_MATCHED_TOKEN / FINISH_LENGTH / FINISH_ABORT .to_json().
  const finish = {
    stop: { type: 'stop', matched: g.matched },
    length: { type: 'length', length: g.ids.length },
    abort: { type: 'abort', message: 'Aborted', status_code: null, err_type: null },
  }[g.finish];
  const meta = { id: `gen-${Date.now()}`, finish_reason: finish, prompt_tokens: req.input_ids.length, completion_tokens: g.ids.length };
  if (req.return_logprob) meta.output_token_logprobs = g.ids.map((t, i) => [g.lps[i], t, null]);
  return { text: g.text, output_ids: g.ids, meta_info: meta };
}

const routes = {
  'GET /health': async () => ({}),
  'GET /v1/models': async () => ({ object: 'list', data: [{ id: modelName, object: 'model', max_model_len: 4096 }] }),
  'POST /v1/completions': completions,
  'POST /generate': sglangGenerate,
  'POST /pause': pause,
  'POST /resume': resume,
  'GET /is_paused': async () => ({ is_paused: paused }),
  'POST /pause_generation': sglangPause,
  'POST /continue_generation': async () => (await resume(), { message: 'Generation continued successfully.', status: 'ok' }),
  'POST /abort_request': sglangAbort,
  'POST /tokenize': async (req) => {
    need(typeof req.prompt === 'string', 'prompt must be a string (chat messages are not supported here)');
    const tokens = model.tokenize(req.prompt, true);
    return { tokens, count: tokens.length, max_model_len: 4096 };
  },
  'POST /detokenize': async (req) => {
    need(Array.isArray(req.tokens), 'tokens must be a list of ids');
    return { prompt: model.detokenize(req.tokens, true) };
  },
};

const server = http.createServer((hreq, hres) => {
  let body = '';
  hreq.on('data', (c) => (body += c));
  hreq.on('end', async () => {
    const path = hreq.url.split('?')[0];
    const route = routes[`${hreq.method} ${path}`];
    let status = 200;
    let out;
    let req = null;
    try {
      if (!route) {
        status = 404;
        out = { error: { message: `no route ${hreq.method} ${path}` } };
      } else {
        req = body ? JSON.parse(body) : {};
        out = await route(req, new URL(hreq.url, 'http://localhost').searchParams);
      }
    } catch (e) {
      status = e instanceof BadRequest || e instanceof SyntaxError ? 400 : 500;
      out = { error: { message: String(e.message || e) } };
    }
    const data = JSON.stringify(out);
    if (logFile && path !== '/health') fs.writeSync(logFile, JSON.stringify({ path, request: req, response: out, status }) + '\n');
    hres.writeHead(status, { 'Content-Type': 'application/json' });
    hres.end(data);
  });
});

const [host, port] = (args.listen || '127.0.0.1:0').split(':');
server.listen(Number(port), host, () => {
  const addr = `${host}:${server.address().port}`;
  if (args['addr-file']) fs.writeFileSync(args['addr-file'], addr);
  console.error(`llama.cpp vLLM-protocol server on ${addr}`);
});
process.on('SIGTERM', () => process.exit(0));
