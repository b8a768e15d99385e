/* Reading a GGUF file (llama.cpp's format) that is already in memory, with checks.
 *
 * The browser's counterpart of what qkv.smollm2 asks of `gguf.GGUFReader`: the header, the
 * metadata (key, type, value) and the list of tensors (name, shape, type, where the bytes
 * are). Nothing is copied or dequantized here: a tensor is a view into the file's bytes.
 *
 * Every check says what is wrong in words a reader can act on: a file that is not GGUF,
 * a version this reader does not know, a value type it cannot read, a tensor whose bytes
 * lie beyond the end of the file (a cut-short download). Checks of what SmolLM2 needs
 * (names, shapes, types) are in smollm2.js, which knows the model.
 *
 * Layout (little-endian): "GGUF", uint32 version, uint64 tensor count, uint64 metadata
 * count, the metadata, the tensor infos, padding to `general.alignment` (32 unless the
 * file says otherwise), then the tensor data; each tensor's offset counts from there.
 */

export class FileError extends Error {
  constructor(message) {
    super(message);
    this.name = "FileError";
  }
}

export const MAGIC = "GGUF";
export const VERSIONS = [2, 3]; // version 1 counted with 32-bit integers; 2 and 3 share a layout

/* The tensor types this reader can dequantize: weights per block and bytes per block. */
export const GGML_TYPES = {
  0: { name: "F32", block: 1, bytes: 4 },
  1: { name: "F16", block: 1, bytes: 2 },
  3: { name: "Q4_1", block: 32, bytes: 20 }, // f16 scale, f16 minimum, 16 bytes of nibbles
  8: { name: "Q8_0", block: 32, bytes: 34 }, // f16 scale, 32 signed bytes
};

const VALUE = { UINT8: 0, INT8: 1, UINT16: 2, INT16: 3, UINT32: 4, INT32: 5, FLOAT32: 6,
                BOOL: 7, STRING: 8, ARRAY: 9, UINT64: 10, INT64: 11, FLOAT64: 12 };
const FIXED_SIZE = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };

function megabytes(n) {
  return (n / 1e6).toFixed(1) + " MB";
}

/* A cursor over the file's bytes that refuses to read past the end. */
class Cursor {
  constructor(bytes) {
    this.bytes = bytes;
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.pos = 0;
    this.utf8 = new TextDecoder("utf-8", { fatal: true });
  }

  need(n, what) {
    if (this.pos + n > this.bytes.byteLength) {
      throw new FileError("The model file is cut short: it has " + this.bytes.byteLength +
        " bytes and ends inside " + what + " (byte " + this.pos + " needs " + n +
        " more). The download was probably interrupted: load the model again.");
    }
  }

  u32(what) { this.need(4, what); const x = this.view.getUint32(this.pos, true); this.pos += 4; return x; }

  u64(what) {
    this.need(8, what);
    const x = this.view.getBigUint64(this.pos, true);
    this.pos += 8;
    if (x > BigInt(Number.MAX_SAFE_INTEGER)) {
      throw new FileError("The model file is damaged: " + what + " is " + x + ", far too large.");
    }
    return Number(x);
  }

  string(what) {
    const n = this.u64("the length of " + what);
    this.need(n, what);
    let text;
    try {
      text = this.utf8.decode(this.bytes.subarray(this.pos, this.pos + n));
    } catch (err) {
      throw new FileError("The model file is damaged: " + what + " at byte " + this.pos +
                          " is not valid UTF-8 text.");
    }
    this.pos += n;
    return text;
  }

  value(type, what) {
    if (type === VALUE.STRING) return this.string(what);
    if (type === VALUE.ARRAY) {
      const itemType = this.u32("the item type of " + what);
      const n = this.u64("the length of " + what);
      if (itemType === VALUE.ARRAY) throw new FileError("The model file has an array of arrays (" + what + "), which this reader does not read.");
      if (itemType !== VALUE.STRING) {
        if (!(itemType in FIXED_SIZE)) throw new FileError("The model file is damaged: " + what + " has items of unknown type " + itemType + ".");
        this.need(n * FIXED_SIZE[itemType], what);
      }
      const items = new Array(n);
      for (let i = 0; i < n; i++) items[i] = this.value(itemType, what);
      return items;
    }
    if (!(type in FIXED_SIZE)) {
      throw new FileError("The model file is damaged: " + what + " has unknown value type " + type + ".");
    }
    this.need(FIXED_SIZE[type], what);
    const v = this.view, p = this.pos;
    this.pos += FIXED_SIZE[type];
    switch (type) {
      case VALUE.UINT8: return v.getUint8(p);
      case VALUE.INT8: return v.getInt8(p);
      case VALUE.UINT16: return v.getUint16(p, true);
      case VALUE.INT16: return v.getInt16(p, true);
      case VALUE.UINT32: return v.getUint32(p, true);
      case VALUE.INT32: return v.getInt32(p, true);
      case VALUE.FLOAT32: return v.getFloat32(p, true);
      case VALUE.BOOL: return v.getUint8(p) !== 0;
      case VALUE.UINT64: return Number(v.getBigUint64(p, true));
      case VALUE.INT64: return Number(v.getBigInt64(p, true));
      default: return v.getFloat64(p, true); // FLOAT64
    }
  }
}

/**
 * Read a GGUF file's header, metadata and tensor list.
 *
 * @param {Uint8Array} bytes the whole file
 * @returns {{version: number, metadata: Object<string, *>, tensors: Object<string, Tensor>,
 *            dataStart: number, byteLength: number}}
 *   where a Tensor is {name, type, typeName, dims (fastest first, as GGUF lists them),
 *   count, start, size, bytes (a Uint8Array view of its data)}
 * @throws {FileError} naming what is wrong
 */
export function readGGUF(bytes) {
  const c = new Cursor(bytes);
  c.need(4, "the first four bytes, which name the format");
  const magic = String.fromCharCode(bytes[0], bytes[1], bytes[2], bytes[3]);
  if (magic !== MAGIC) {
    throw new FileError("This is not a GGUF model file: it starts with the bytes " +
      Array.from(bytes.subarray(0, 4), function (b) { return b.toString(16).padStart(2, "0"); }).join(" ") +
      ", where a GGUF file starts with \"GGUF\" (47 47 55 46). The server may have sent an error page instead.");
  }
  c.pos = 4;
  const version = c.u32("the version number");
  if (VERSIONS.indexOf(version) < 0) {
    throw new FileError("The model file is GGUF version " + version + "; this reader reads versions " +
                        VERSIONS.join(" and ") + ".");
  }
  const tensorCount = c.u64("the number of tensors");
  const kvCount = c.u64("the number of metadata entries");

  const metadata = {};
  for (let i = 0; i < kvCount; i++) {
    const key = c.string("the name of metadata entry " + (i + 1));
    const type = c.u32("the type of " + key);
    metadata[key] = c.value(type, "metadata entry " + key);
  }

  const infos = [];
  for (let i = 0; i < tensorCount; i++) {
    const name = c.string("the name of tensor " + (i + 1));
    const nDims = c.u32("the number of dimensions of " + name);
    if (nDims < 1 || nDims > 4) {
      throw new FileError("The model file is damaged: tensor " + name + " claims " + nDims + " dimensions (GGUF allows 1 to 4).");
    }
    const dims = [];
    for (let d = 0; d < nDims; d++) dims.push(c.u64("dimension " + (d + 1) + " of " + name));
    const type = c.u32("the type of " + name);
    const offset = c.u64("the offset of " + name);
    infos.push({ name: name, dims: dims, type: type, offset: offset });
  }

  const alignment = metadata["general.alignment"] === undefined ? 32 : metadata["general.alignment"];
  if (!(Number.isInteger(alignment) && alignment > 0)) {
    throw new FileError("The model file is damaged: general.alignment is " + alignment + ".");
  }
  const dataStart = Math.ceil(c.pos / alignment) * alignment;

  const tensors = {};
  infos.forEach(function (info) {
    const kind = GGML_TYPES[info.type];
    if (!kind) {
      throw new FileError("Tensor " + info.name + " has GGML type " + info.type + "; this reader " +
        "dequantizes " + Object.keys(GGML_TYPES).map(function (t) { return GGML_TYPES[t].name; }).join(", ") + ".");
    }
    const count = info.dims.reduce(function (a, b) { return a * b; }, 1);
    if (info.dims[0] % kind.block) {
      throw new FileError("Tensor " + info.name + " (" + kind.name + ") has rows of " + info.dims[0] +
        " numbers, not a whole number of blocks of " + kind.block + ".");
    }
    if (info.offset % alignment) {
      throw new FileError("The model file is damaged: tensor " + info.name + " starts at offset " +
        info.offset + ", not a multiple of the alignment " + alignment + ".");
    }
    const start = dataStart + info.offset, size = (count / kind.block) * kind.bytes;
    if (start + size > bytes.byteLength) {
      throw new FileError("The model file is cut short: it has " + bytes.byteLength + " bytes (" +
        megabytes(bytes.byteLength) + "), but tensor " + info.name + " needs bytes up to " + (start + size) +
        " (" + megabytes(start + size) + "). The download was probably interrupted: load the model again.");
    }
    if (tensors[info.name]) throw new FileError("The model file lists tensor " + info.name + " twice.");
    tensors[info.name] = {
      name: info.name, type: info.type, typeName: kind.name, dims: info.dims, count: count,
      start: start, size: size, bytes: bytes.subarray(start, start + size),
    };
  });
  return { version: version, metadata: metadata, tensors: tensors, dataStart: dataStart,
           byteLength: bytes.byteLength };
}
