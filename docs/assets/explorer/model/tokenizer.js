/* The tokenizer, built from the model file as qkv/smollm2_file.py's build_tokenizer builds it.
 *
 * The GGUF file holds the vocabulary (49,152 strings), the merges and each token's kind.
 * qkv hands them to Hugging Face's `tokenizers` (Rust): byte-level BPE, a ByteLevel
 * pre-tokenizer that adds no space in front, a ByteLevel decoder, and the control tokens
 * (<|im_start|> and its kind) kept whole. Here the same description, in the JSON format
 * that `tokenizers` writes (Tokenizer.to_str()), goes to Hugging Face's tokenizers.js, a
 * pure-JavaScript port (vendor/tokenizers.js, pinned in vendor/PINNED.txt). The browser
 * tests check that the description equals what Python writes and that both give the same
 * ids on texts chosen to be hard.
 */

import { Tokenizer } from "./vendor/tokenizers.js";
import { FileError } from "./gguf.js";

const CONTROL = 3; // tokenizer.ggml.token_type of a control token (llama.cpp's enum)

/* The tokenizer's description, as Python's `tokenizers` serializes the one qkv builds. */
export function tokenizerJson(tokens, merges, kinds) {
  const vocab = {};
  tokens.forEach(function (token, id) { vocab[token] = id; });
  const byteLevel = { type: "ByteLevel", trim_offsets: true, use_regex: true };
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: tokens.map(function (token, id) {
      return { id: id, content: token, single_word: false, lstrip: false, rstrip: false,
               normalized: false, special: true };
    }).filter(function (_, id) { return kinds[id] === CONTROL; }),
    normalizer: null,
    // byte-level: every byte becomes a printable character first; no space is added in front
    pre_tokenizer: Object.assign({}, byteLevel, { add_prefix_space: false }),
    post_processor: null,
    decoder: Object.assign({}, byteLevel, { add_prefix_space: true }),
    model: {
      type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: null,
      end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, ignore_merges: false,
      vocab: vocab,
      merges: merges.map(function (m) { return m.split(" "); }),
    },
  };
}

/* The tokenizer of a model file's metadata (what readGGUF returned as `metadata`). */
export function buildTokenizer(meta) {
  if (meta["tokenizer.ggml.model"] !== "gpt2") {
    throw new FileError("Expected a byte-level BPE (gpt2) tokenizer in the file; it has " +
                        JSON.stringify(meta["tokenizer.ggml.model"]) + ".");
  }
  const tokens = meta["tokenizer.ggml.tokens"], merges = meta["tokenizer.ggml.merges"];
  const kinds = meta["tokenizer.ggml.token_type"];
  if (!Array.isArray(tokens) || !Array.isArray(merges) || !Array.isArray(kinds) || kinds.length !== tokens.length) {
    throw new FileError("The model file's vocabulary is incomplete (tokens, merges or token kinds missing).");
  }
  return new Tokenizer(tokenizerJson(tokens, merges, kinds), {});
}

/* Token ids of `text`: no BOS token, no special tokens added (Model.encode). */
export function encode(tokenizer, text) {
  return tokenizer.encode(text, { add_special_tokens: false }).ids;
}

/* Each token's text as shown, ' cat' with its leading space (Model.pieces): decoded alone,
   with no clean-up of spaces (tokenizers.js would otherwise drop the space before "."). */
export function pieces(tokenizer, ids) {
  return ids.map(function (id) {
    return tokenizer.decode([id], { skip_special_tokens: false, clean_up_tokenization_spaces: false });
  });
}

/* Python's str.isspace() characters: what str.strip() removes (JavaScript's trim() differs
   in \x1c-\x1f, \x85 and \ufeff). */
const SPACE = "\\t\\n\\v\\f\\r\\x1c-\\x20\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
const STRIP = new RegExp("^[" + SPACE + "]+|[" + SPACE + "]+$", "g");

/* A token's text as the page shows it (qkv_site.smollm2_data.label): surrounding whitespace
   dropped, a token that is only whitespace shown as ␣ per space, ⏎ per newline, ⇥ per tab. */
export function label(piece) {
  const stripped = piece.replace(STRIP, "");
  if (stripped) return stripped;
  return piece.replace(/ /g, "\u2423").replace(/\n/g, "\u23ce").replace(/\t/g, "\u21e5") || "\u2423";
}
