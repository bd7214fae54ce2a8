/**
 * Exact prompt counts for the integrations' estimates (docs/integrations.md, "Tokenizers").
 *
 * Core estimates a prompt as, per message, 4 framing tokens plus `ceil(chars / 4)` per text.
 * A tokenizer replaces the second part only: core lists the texts it counts
 * (`pricing.promptTexts`), the tokenizer counts each, and core adds the framing (`textTokens`
 * of `pricing.estimateRequest`), so which members of a request are prompt stays core's rule.
 *
 * A guard's `tokenizer` is `"auto"` (the default: `js-tiktoken` when it is installed and maps
 * the model to an encoding, i.e. OpenAI's models; its ranks ship in the package, so nothing is
 * downloaded, and each encoding is built once per process, about a second for `o200k_base`),
 * a function of a text returning its token count (every model), or `null` (core's estimate).
 * @module
 * @internal
 */
import { InvalidArgumentError } from "./errors";
import type { Int64 } from "./models";
import * as pricing from "./pricing";

/** Counts the tokens of one text. */
export type TextCounter = (text: string) => number;

/** A guard's `tokenizer`: `"auto"`, a {@link TextCounter}, or `null` (core's estimate). */
export type Tokenizer = "auto" | TextCounter | null;

interface JsTiktokenLite {
  Tiktoken: new (ranks: unknown) => { encode(text: string, allowedSpecial?: unknown, disallowedSpecial?: unknown): number[] };
  getEncodingNameForModel(model: string): string;
}

let lite: JsTiktokenLite | null | undefined;
const encodings = new Map<string, TextCounter>();

/** js-tiktoken's lite entry, or null when it is not installed. */
function jsTiktoken(): JsTiktokenLite | null {
  if (lite === undefined) {
    try {
      lite = require("js-tiktoken/lite") as JsTiktokenLite;
    } catch {
      lite = null;
    }
  }
  return lite;
}

/**
 * js-tiktoken's count for `model`, or null when js-tiktoken is not installed or does not know
 * the model. Special-token text in a prompt counts as ordinary text, as the provider counts it.
 */
export function tiktokenCounter(model: string): TextCounter | null {
  // Per model, once: js-tiktoken throws for a model it does not know, on every call.
  let known = byModel.get(model);
  if (known === undefined) {
    known = counterOf(model);
    if (byModel.size < 1024) byModel.set(model, known);
  }
  return known;
}

const byModel = new Map<string, TextCounter | null>();

function counterOf(model: string): TextCounter | null {
  const t = jsTiktoken();
  if (t === null) return null;
  let name: string;
  try {
    name = t.getEncodingNameForModel(model);
  } catch {
    return null; // not an OpenAI model (e.g. Claude): core's estimate
  }
  let count = encodings.get(name);
  if (count === undefined) {
    const ranks = require(`js-tiktoken/ranks/${name}`) as { default?: unknown };
    const enc = new t.Tiktoken(ranks.default ?? ranks);
    count = (text) => enc.encode(text, [], []).length;
    encodings.set(name, count);
  }
  return count;
}

/** Refuses a `tokenizer` that is none of the three kinds. @internal */
export function checkTokenizer(tokenizer: unknown, what: string): void {
  if (tokenizer === undefined || tokenizer === null || tokenizer === "auto" || typeof tokenizer === "function") return;
  throw new InvalidArgumentError(`${what}: tokenizer must be "auto", a function of a text returning its token count, or null; not ${JSON.stringify(tokenizer)}`);
}

/**
 * The counts of the request's prompt texts (core's `textTokens`), or null where core's
 * estimate applies. A counter returning anything but a non-negative safe integer is refused
 * before anything is reserved.
 */
export function textTokens(tokenizer: Tokenizer | undefined, model: string, request: object): Int64[][] | null {
  const counter = tokenizer === undefined || tokenizer === "auto" ? tiktokenCounter(model) : tokenizer;
  if (counter === null) return null;
  return pricing.promptTexts(request).map((texts) =>
    texts.map((text) => {
      const n = counter(text);
      if (!Number.isSafeInteger(n) || n < 0) throw new InvalidArgumentError(`the tokenizer returned ${String(n)} for a text; it must return a non-negative integer`);
      return n;
    }),
  );
}
