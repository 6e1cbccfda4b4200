// Copies a GGUF (v2/v3) with one more metadata key, <arch>.pooling_type =
// VALUE (uint32), as a converter writes it for an embedding model, so the
// embeddings test can check that the server takes its default pooling
// from the file.
//   node gguf_set_pooling.mjs IN.gguf OUT.gguf VALUE
import { readFileSync, writeFileSync } from 'node:fs';

const [input, output, value] = process.argv.slice(2);
const buf = readFileSync(input);
let at = 0;
const u32 = () => { const v = buf.readUInt32LE(at); at += 4; return v; };
const u64 = () => { const v = Number(buf.readBigUInt64LE(at)); at += 8; return v; };
const str = () => { const n = u64(); const s = buf.toString('utf8', at, at + n); at += n; return s; };
const SIZES = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
function skip(type) {
  if (type === 8) { str(); return; }
  if (type === 9) { const t = u32(); const n = u64(); for (let i = 0; i < n; i++) skip(t); return; }
  if (!(type in SIZES)) throw new Error(`unknown GGUF value type ${type}`);
  at += SIZES[type];
}

if (buf.toString('latin1', 0, 4) !== 'GGUF') throw new Error(`${input} is not a GGUF file`);
at = 4;
const version = u32();
const nTensors = u64();
const nKv = u64();
const kvStart = at;
let arch = '', alignment = 32;
for (let i = 0; i < nKv; i++) {
  const key = str();
  const type = u32();
  const valueAt = at;
  if (key === 'general.architecture') arch = str();
  else if (key === 'general.alignment') alignment = u32();
  else skip(type);
  if (key === `${arch}.pooling_type`) throw new Error(`${input} already has ${key}`);
  void valueAt;
}
const kvEnd = at;
for (let i = 0; i < nTensors; i++) { str(); const nd = u32(); at += 8 * nd + 4 + 8; }
const infosEnd = at;
const dataStart = Math.ceil(infosEnd / alignment) * alignment;

const key = Buffer.from(`${arch}.pooling_type`, 'utf8');
const kv = Buffer.alloc(8 + key.length + 4 + 4);
kv.writeBigUInt64LE(BigInt(key.length), 0);
key.copy(kv, 8);
kv.writeUInt32LE(4, 8 + key.length);  // uint32
kv.writeUInt32LE(Number(value), 12 + key.length);
const head = Buffer.alloc(24);
head.write('GGUF', 0, 'latin1');
head.writeUInt32LE(version, 4);
head.writeBigUInt64LE(BigInt(nTensors), 8);
head.writeBigUInt64LE(BigInt(nKv + 1), 16);
const meta = Buffer.concat([head, buf.subarray(kvStart, kvEnd), kv, buf.subarray(kvEnd, infosEnd)]);
const pad = Buffer.alloc(Math.ceil(meta.length / alignment) * alignment - meta.length);
writeFileSync(output, Buffer.concat([meta, pad, buf.subarray(dataStart)]));
