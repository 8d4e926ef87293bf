/**
 * The org's limits and default model in one read (issue 15: `ensure-runtime`'s Begin admits by
 * the one and Provision boots with the other), on dynalite: the same values the separate reads
 * give, each absent part as its default, and a single request.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoOrgSettingsStore } from "../../functions/store/dynamo-org-settings";
import { DynamoOrgUsageStore } from "../../functions/store/dynamo-org-usage";
import { T0 } from "../support/builders";
import { startTestTable, type TestTable } from "../support/dynalite";

let table: TestTable;
let usage: DynamoOrgUsageStore;
let settings: DynamoOrgSettingsStore;

beforeAll(async () => {
  table = await startTestTable();
  usage = new DynamoOrgUsageStore(table.doc, table.tableName);
  settings = new DynamoOrgSettingsStore(table.doc, table.tableName);
});
afterAll(async () => table.close());

/** The commands sent through the table's client while `run` runs. */
async function commandsOf(run: () => Promise<unknown>): Promise<string[]> {
  const client = table.doc as unknown as { send: (command: { constructor: { name: string } }) => Promise<unknown> };
  const send = client.send.bind(client);
  const seen: string[] = [];
  client.send = (command) => {
    seen.push(command.constructor.name);
    return send(command);
  };
  try {
    await run();
  } finally {
    client.send = send;
  }
  return seen;
}

describe("getLimitsAndModel", () => {
  it("returns what getLimits and getModel return, in one BatchGetItem", async () => {
    await usage.putLimits("org-both", { maxRunningSessions: 3, monthlyActiveSeconds: 3600 }, T0);
    await settings.putModel("org-both", { id: "anthropic/claude-sonnet-4-5", apiKeySecret: "ANTHROPIC_KEY" }, T0);
    let read: Awaited<ReturnType<DynamoOrgUsageStore["getLimitsAndModel"]>> | undefined;
    const sent = await commandsOf(async () => (read = await usage.getLimitsAndModel("org-both")));
    expect(sent).toEqual(["BatchGetCommand"]);
    expect(read).toEqual({ limits: await usage.getLimits("org-both"), model: await settings.getModel("org-both") });
    expect(read).toEqual({ limits: { maxRunningSessions: 3, monthlyActiveSeconds: 3600 }, model: { id: "anthropic/claude-sonnet-4-5", apiKeySecret: "ANTHROPIC_KEY" } });
  });

  it("an org with only one of the items, or neither, gets the other's default (unlimited, no model)", async () => {
    await usage.putLimits("org-limits-only", { maxRunningSessions: 1 }, T0);
    await settings.putModel("org-model-only", { id: "openai/gpt-5" }, T0);
    expect(await usage.getLimitsAndModel("org-limits-only")).toEqual({ limits: { maxRunningSessions: 1, monthlyActiveSeconds: null }, model: null });
    expect(await usage.getLimitsAndModel("org-model-only")).toEqual({ limits: { maxRunningSessions: null, monthlyActiveSeconds: null }, model: { id: "openai/gpt-5" } });
    expect(await usage.getLimitsAndModel("org-neither")).toEqual({ limits: { maxRunningSessions: null, monthlyActiveSeconds: null }, model: null });
  });
});
