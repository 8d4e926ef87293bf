/**
 * What an e2e test prints when it fails (CI shows only the failure): the runtime's flow
 * executions, the tail of every local sandbox's logs, and what each WebSocket client received.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import type { LocalRuntime } from "../../infra/local/runtime";
import type { TestWsClient } from "./ws-client";

function tail(file: string, bytes: number): string {
  try {
    const text = readFileSync(file, "utf8");
    return text.length > bytes ? `...${text.slice(-bytes)}` : text;
  } catch (err) {
    return `(unreadable: ${(err as Error).message})`;
  }
}

export function runtimeDiagnostics(runtime: LocalRuntime, clients: readonly TestWsClient[] = [], logBytes = 3000): string {
  const lines: string[] = ["--- flow executions"];
  for (const e of runtime.flows.executions.values()) {
    lines.push(`${e.flow} ${e.name} ${e.status}${e.error ? ` ${e.error}` : ""} session=${String((e.input as { sessionId?: unknown }).sessionId ?? "")}`);
  }
  try {
    const relay = runtime.relay();
    lines.push(`--- relay counters ${JSON.stringify(relay.counters)} streams ${JSON.stringify(relay.streamCounters())}`);
  } catch (err) {
    lines.push(`(no relay: ${(err as Error).message})`);
  }
  const root = join(runtime.sandboxDir, "sandboxes");
  let sandboxes: string[] = [];
  try {
    sandboxes = readdirSync(root);
  } catch {
    lines.push(`(no ${root})`);
  }
  for (const id of sandboxes) {
    const dir = join(root, id);
    if (!statSync(dir).isDirectory()) continue;
    for (const file of readdirSync(dir).filter((f) => f.endsWith(".log"))) {
      lines.push(`--- ${id}/${file}`, tail(join(dir, file), logBytes));
    }
  }
  clients.forEach((c, i) => {
    lines.push(`--- client ${i} received ${c.received.length} frames (last 25)`, ...c.received.slice(-25).map((m) => JSON.stringify(m).slice(0, 300)));
  });
  return lines.join("\n");
}
