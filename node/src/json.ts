/**
 * JSON text with exact integers, both ways: {@link parseJson} reads an integer beyond
 * ±(2^53 − 1) as a `bigint` (`JSON.parse` would round 2^63 − 1 to 9223372036854775808), and
 * {@link stringifyJson} writes a `bigint` as a JSON integer (`JSON.stringify` throws on one).
 * Everything else is exactly what `JSON.parse` / `JSON.stringify` do. Node 20 has neither
 * `JSON.rawJSON` nor the reviver's source text, hence this module.
 * @module
 * @internal
 */

// An integer of at most 15 digits is a safe integer, and a JSON number follows `:`, `[` or
// `,`: text with no 16-digit run there (nearly every result: epoch milliseconds have 13
// digits; hex ids have no such prefix) parses natively.
const LONG_NUMBER = /(?:^|[:[,])\s*-?\d{16}/;

const NUMBER = /-?(?:0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/y;

/** Parses JSON text; integers beyond ±(2^53 − 1) become `bigint`, every other value is `JSON.parse`'s. */
export function parseJson(text: string): unknown {
  if (!LONG_NUMBER.test(text)) return JSON.parse(text);
  const r = new Reader(text);
  const v = r.value();
  r.end();
  return v;
}

class Reader {
  private i = 0;

  constructor(private readonly s: string) {}

  end(): void {
    this.ws();
    if (this.i !== this.s.length) this.fail();
  }

  value(): unknown {
    this.ws();
    switch (this.s[this.i]) {
      case "{":
        return this.object();
      case "[":
        return this.array();
      case '"':
        return this.string();
      case "t":
        return this.literal("true", true);
      case "f":
        return this.literal("false", false);
      case "n":
        return this.literal("null", null);
      default:
        return this.number();
    }
  }

  private ws(): void {
    const s = this.s;
    while (this.i < s.length && (s[this.i] === " " || s[this.i] === "\n" || s[this.i] === "\r" || s[this.i] === "\t")) this.i++;
  }

  private fail(): never {
    throw new SyntaxError(`Unexpected character at position ${this.i} of JSON text`);
  }

  private expect(c: string): void {
    this.ws();
    if (this.s[this.i] !== c) this.fail();
    this.i++;
  }

  private object(): Record<string, unknown> {
    this.i++;
    const out: Record<string, unknown> = {};
    this.ws();
    if (this.s[this.i] === "}") {
      this.i++;
      return out;
    }
    for (;;) {
      this.ws();
      if (this.s[this.i] !== '"') this.fail();
      const k = this.string();
      this.expect(":");
      const v = this.value();
      // An own "__proto__" member, as JSON.parse makes it (assignment would set the prototype).
      if (k === "__proto__") Object.defineProperty(out, k, { value: v, writable: true, enumerable: true, configurable: true });
      else out[k] = v;
      this.ws();
      if (this.s[this.i] === ",") {
        this.i++;
        continue;
      }
      this.expect("}");
      return out;
    }
  }

  private array(): unknown[] {
    this.i++;
    const out: unknown[] = [];
    this.ws();
    if (this.s[this.i] === "]") {
      this.i++;
      return out;
    }
    for (;;) {
      out.push(this.value());
      this.ws();
      if (this.s[this.i] === ",") {
        this.i++;
        continue;
      }
      this.expect("]");
      return out;
    }
  }

  private string(): string {
    const start = this.i++;
    const s = this.s;
    while (this.i < s.length && s[this.i] !== '"') this.i += s[this.i] === "\\" ? 2 : 1;
    if (this.i >= s.length) this.fail();
    this.i++;
    // The escapes (lone surrogates included) exactly as JSON.parse reads them.
    return JSON.parse(s.slice(start, this.i)) as string;
  }

  private literal<T>(word: string, v: T): T {
    if (!this.s.startsWith(word, this.i)) this.fail();
    this.i += word.length;
    return v;
  }

  private number(): number | bigint {
    NUMBER.lastIndex = this.i;
    const m = NUMBER.exec(this.s);
    if (m === null) this.fail();
    this.i += m[0].length;
    const n = Number(m[0]);
    if (m[1] !== undefined || m[2] !== undefined || Number.isSafeInteger(n)) return n;
    return BigInt(m[0]);
  }
}

/**
 * `JSON.stringify(value)`, except that a `bigint` is written as a JSON integer instead of
 * throwing. Values without one take the native path unchanged.
 */
export function stringifyJson(value: unknown): string {
  try {
    return JSON.stringify(value);
  } catch (e) {
    if (!(e instanceof TypeError)) throw e;
  }
  // Only a bigint (or a cycle, which write() reports as JSON.stringify does) gets here.
  return write("", value, new Set()) ?? "null";
}

function write(key: string, v: unknown, stack: Set<object>): string | undefined {
  if (v !== null && typeof v === "object" && typeof (v as { toJSON?: unknown }).toJSON === "function") {
    v = (v as { toJSON: (k: string) => unknown }).toJSON(key);
  }
  switch (typeof v) {
    case "bigint":
      return v.toString();
    case "string":
    case "number":
    case "boolean":
      return JSON.stringify(v);
    case "undefined":
    case "function":
    case "symbol":
      return undefined;
  }
  if (v === null) return "null";
  if (v instanceof Number || v instanceof String || v instanceof Boolean) return JSON.stringify(v);
  const o = v as object;
  if (stack.has(o)) throw new TypeError("Converting circular structure to JSON");
  stack.add(o);
  try {
    if (Array.isArray(o)) return `[${o.map((x, i) => write(String(i), x, stack) ?? "null").join(",")}]`;
    const parts: string[] = [];
    for (const [k, x] of Object.entries(o)) {
      const s = write(k, x, stack);
      if (s !== undefined) parts.push(`${JSON.stringify(k)}:${s}`);
    }
    return `{${parts.join(",")}}`;
  } finally {
    stack.delete(o);
  }
}
