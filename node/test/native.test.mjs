// The native boundary: panics become InternalError (sync and async), a dropped native task
// rejects its promise instead of hanging, and every kind of core's error table has a class.
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { test } from "node:test";

import { CyclesError, ERROR_CODES, InternalError, errorClass, nativeVersion } from "cycles-sdk";

const require = createRequire(import.meta.url);
const { native } = require("../dist/native.js");
const { call, awaitNative } = require("../dist/errors.js");

test("a panic in a sync export is an InternalError, and the process lives on", () => {
  assert.throws(() => call(() => native.debugPanic(true)), (e) => {
    assert.ok(e instanceof InternalError);
    assert.equal(e.errorName, "INTERNAL");
    assert.equal(e.code, 4);
    assert.match(e.message, /a bug; please report it.*deliberate test panic/);
    return true;
  });
});

test("a panic in a task on core's runtime rejects with an InternalError", async () => {
  await assert.rejects(awaitNative(native.debugPanic(false)), (e) => e instanceof InternalError && /deliberate async test panic/.test(e.message));
});

test("a native task dropped before settling rejects its promise", async () => {
  await assert.rejects(awaitNative(native.debugDroppedPromise()), (e) => e instanceof InternalError && /without settling its promise/.test(e.message));
});

test("every kind of core's error table has its class; codes come from core", () => {
  assert.ok(ERROR_CODES.size >= 30);
  for (const [name, code] of ERROR_CODES) {
    const cls = errorClass(name);
    assert.notEqual(cls, CyclesError, `${name} has no class`);
    const e = new cls("m");
    assert.equal(e.errorName, name);
    assert.equal(e.code, code);
  }
  assert.equal(errorClass("SOMETHING_NEW"), CyclesError);
  assert.equal(nativeVersion(), require("../package.json").version);
});
