#!/usr/bin/env node
// `sbxctl` (package.json `bin`): runs the TypeScript CLI through tsx's loader (a dependency).
import { register } from "tsx/esm/api";

register();
const { main } = await import("./main.ts");
process.exitCode = await main(process.argv.slice(2));
