#!/usr/bin/env node
/**
 * The package's `cycles-sdk` bin (`npx cycles-sdk serve`, `demo`, `plan`, `journal`): the
 * project's Rust `cycles` command, linked into the addon and run in this process, so the
 * package ships no second executable.
 * @internal
 */
import { native } from "./native";

process.exitCode = native.runCli(["cycles-sdk", ...process.argv.slice(2)]);
