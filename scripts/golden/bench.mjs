// Encode throughput of the reference tokenizer (transformers.js) on a file:
// node bench.mjs <models dir> <model> <file>  ->  {"mb_per_s": ...}
import { AutoTokenizer, env } from '@huggingface/transformers';
import fs from 'node:fs';
import path from 'node:path';

const [modelsDir, model, file] = process.argv.slice(2);
env.allowRemoteModels = false;
env.localModelPath = path.resolve(modelsDir) + '/';
const tok = await AutoTokenizer.from_pretrained(model);
const text = fs.readFileSync(file, 'utf8');
const bytes = Buffer.byteLength(text);
tok.encode(text, { add_special_tokens: false }); // warm caches, as the Go figure is warm
let n = 0;
const t0 = process.hrtime.bigint();
let el = 0;
while (n < 3 || el < 2e9) {
  tok.encode(text, { add_special_tokens: false });
  n++;
  el = Number(process.hrtime.bigint() - t0);
}
console.log(JSON.stringify({ mb_per_s: (bytes * n) / (el / 1e9) / 1e6, runs: n }));
