// Generates the tokenizer and chat-template goldens from the reference
// implementation (Hugging Face transformers.js with @huggingface/jinja).
// Usage: node gen.mjs <models dir> <testdata dir>. Run by `make golden`.
import { AutoTokenizer, env } from '@huggingface/transformers';
import fs from 'node:fs';
import path from 'node:path';

const [modelsDir, testdata] = process.argv.slice(2);
env.allowRemoteModels = false;
env.localModelPath = path.resolve(modelsDir) + '/';

const read = (p) => JSON.parse(fs.readFileSync(path.join(testdata, p), 'utf8'));
const texts = read('corpus/texts.json');
const conversations = read('corpus/conversations.json');
const toolSets = read('corpus/tools.json');

// A deterministic generator (mulberry32) for random texts.
function rng(seed) {
  return () => {
    seed |= 0; seed = (seed + 0x6D2B79F5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const pool = [
  'the', ' the', 'The', ' quick', 'brown', ' fox', "'s", "'LL", ' ', '  ', '   ', '\n', '\n\n', '\t', '\r\n',
  '0', '7', '42', '1234', '3.14', '-', '_', '.', ',', '!', '?', '...', '(', ')', '{', '}', '[', ']', '<', '>',
  '<|im_start|>', '<|im_end|>', '<think>', '</think>', '<tool_call>', '<|eot_id|>', '<|begin_of_text|>',
  '<｜User｜>', '<｜Assistant｜>', 'é', 'ü', 'ß', 'Σ', 'я', 'ש', 'ع', 'क', '中', '文', 'の', 'カ', '한', '😀', '👍🏽',
  '🇫🇷', '\u200b', '\u00a0', '\u3000', 'e\u0301', 'def ', 'return', ' x', '=', '==', '->', '=>', '//', '/*', '*/',
  '"', "'", '`', '$', '\\', '%', '&', '#', '@', '^', '|', '~', 'ǅ', 'Ⅷ', '½', '²', '𝔘', '\u0085', 'ﬁ',
];
const random = [];
const r = rng(20261122);
for (let i = 0; i < 300; i++) {
  const n = 1 + Math.floor(r() * 40);
  let s = '';
  for (let j = 0; j < n; j++) s += pool[Math.floor(r() * pool.length)];
  random.push(s);
}

const models = {
  qwen3: { templates: { model: null, 'qwen2.5': 'qwen2.5.jinja', 'qwen3-coder': 'qwen3-coder.jinja' },
           kwargs: [{}, { enable_thinking: false }] },
  llama3_1: { templates: { model: null, 'llama3.1-tools': 'llama3.1-tools.jinja' },
              kwargs: [{}, { date_string: '22 Nov 2026' }] },
  deepseek_v3: { templates: { model: null }, kwargs: [{}], stringArgs: true },
};

// DeepSeek V3's template concatenates arguments as a string and expects
// null content on tool-calling turns.
function forDeepSeek(msgs) {
  return msgs.map((m) => {
    if (!m.tool_calls) return m;
    return { ...m, content: m.content === '' ? null : m.content,
      tool_calls: m.tool_calls.map((c) => ({ ...c, function: { ...c.function, arguments: JSON.stringify(c.function.arguments) } })) };
  });
}

for (const [name, spec] of Object.entries(models)) {
  const tok = await AutoTokenizer.from_pretrained(name);
  const encode = [];
  for (const text of [...texts, ...random]) {
    encode.push({ text, ids: tok.encode(text, { add_special_tokens: false }) });
  }
  const withSpecial = texts.slice(0, 5).map((text) => ({ text, ids: tok.encode(text) }));
  const chat = [];
  for (const [tname, file] of Object.entries(spec.templates)) {
    const template = file ? fs.readFileSync(path.join(testdata, 'templates', file), 'utf8') : undefined;
    for (const conv of conversations) {
      let messages = conv.messages;
      if (spec.stringArgs) messages = forDeepSeek(messages);
      const tools = conv.tools ? toolSets[conv.tools] : undefined;
      if (tname === 'llama3.1-tools' && messages.some((m) => m.tool_calls && m.tool_calls.length > 1)) continue;
      for (const kwargs of spec.kwargs) {
        for (const add_generation_prompt of [false, true]) {
          const opts = { tools, add_generation_prompt, chat_template: template, ...kwargs };
          const text = tok.apply_chat_template(messages, { ...opts, tokenize: false });
          // apply_chat_template tokenises without adding special tokens.
          const ids = tok.encode(text, { add_special_tokens: false });
          chat.push({ template: tname, conversation: conv.name, add_generation_prompt, kwargs, messages, tools: tools ?? null, text, ids });
        }
      }
    }
  }
  const dir = path.join(testdata, 'golden', name);
  fs.mkdirSync(dir, { recursive: true });
  const write = (f, v) => fs.writeFileSync(path.join(dir, f), JSON.stringify(v, null, 0).replace(/\},\{"/g, '},\n{"') + '\n');
  write('encode.json', encode);
  write('encode_special.json', withSpecial);
  write('chat.json', chat);
  console.log(`${name}: ${encode.length} encode cases, ${chat.length} chat cases`);
}
