// Run by tokenizer.test.mjs (with and without --preserve-symlinks): guarded calls under the
// default tokenizer "auto"; prints the reserved estimates per model as JSON, and exits by itself.
import OpenAI from "openai";
import { guardOpenAI } from "cycles-sdk/openai";
import { FakeProvider, LocalServer } from "cycles-sdk/testing";

const provider = new FakeProvider();
const server = new LocalServer({ budgets: [{ scope: "tenant:acme", unit: "TOKENS", allocated: 1_000_000 }] });
const cycles = server.client({ journalEnabled: false });
const openai = guardOpenAI(new OpenAI({ baseURL: provider.openaiBaseUrl, apiKey: "sk-fake", maxRetries: 0 }), { client: cycles });
const out = {};
for (const model of ["gpt-4o-mini", "gpt-4o-mini", "claude-fake"]) {
  const before = server.ledger().length;
  await openai.chat.completions.create({
    model,
    max_tokens: 50,
    messages: [
      { role: "system", content: "internationalization" },
      { role: "user", content: "日本語のテキスト" },
    ],
  });
  const reserve = server.ledger().slice(before).find((e) => e.kind === "reserve");
  (out[model] ??= []).push(reserve.amount);
}
await cycles.close();
server.stop();
provider.stop();
console.log(JSON.stringify(out));
