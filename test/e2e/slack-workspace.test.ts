/** `PUT|GET|DELETE /v1/slack/workspace` (API.md "Slack") over the local runtime's HTTP API. */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LocalRuntime } from "../../infra/local/runtime";
import { startRuntimeForTest, type ApiClient } from "../support/local-runtime";

let runtime: LocalRuntime;
let api: ApiClient;
let otherAdmin: string;
let member: string;

beforeAll(async () => {
  ({ runtime, api } = await startRuntimeForTest());
  otherAdmin = await runtime.addApiToken({ userId: "bob", orgId: "other-org", role: "admin" });
  member = await runtime.addApiToken({ userId: "carol", orgId: "dev-org", role: "member" });
});
afterAll(() => runtime?.close());

describe("binding a Slack workspace", () => {
  it("an admin binds, reads, rebinds and unbinds; another org's team is 409; a member is 403; bad input is 400 and changes nothing", async () => {
    expect((await api.request("GET", "/v1/slack/workspace")).status).toBe(404);
    const put = await api.request("PUT", "/v1/slack/workspace", { body: { teamId: "T0AAA", defaultRepo: "acme/app" } });
    expect(put.status, put.text).toBe(200);
    expect(put.body).toEqual({ workspace: { teamId: "T0AAA", defaultRepo: "https://github.com/acme/app.git", createdAt: expect.any(String), updatedAt: expect.any(String) } });
    expect((await api.request("GET", "/v1/slack/workspace")).body).toEqual(put.body);
    expect((await api.request("GET", "/v1/slack/workspace", { token: member })).status).toBe(200);

    const taken = await api.request("PUT", "/v1/slack/workspace", { token: otherAdmin, body: { teamId: "T0AAA" } });
    expect(taken.status).toBe(409);
    expect(taken.text).toContain("another org");
    expect((await api.request("PUT", "/v1/slack/workspace", { token: member, body: { teamId: "T0BBB" } })).status).toBe(403);
    const bad = await api.request("PUT", "/v1/slack/workspace", { body: { teamId: "nope" } });
    expect(bad.status).toBe(400);
    expect(bad.text).toContain("body.teamId");
    const badRepo = await api.request("PUT", "/v1/slack/workspace", { body: { teamId: "T0AAA", defaultRepo: "not a repo" } });
    expect(badRepo.status).toBe(400);
    expect(badRepo.text).toContain("body.defaultRepo");
    expect(((await api.request("GET", "/v1/slack/workspace")).body as { workspace: { defaultRepo: string } }).workspace.defaultRepo).toBe("https://github.com/acme/app.git");

    // Rebinding the same team drops the default repo when the body has none.
    expect(((await api.request("PUT", "/v1/slack/workspace", { body: { teamId: "T0AAA" } })).body as { workspace: { defaultRepo: null } }).workspace.defaultRepo).toBeNull();
    expect((await api.request("DELETE", "/v1/slack/workspace", { token: member })).status).toBe(403);
    expect((await api.request("DELETE", "/v1/slack/workspace")).status).toBe(204);
    expect((await api.request("GET", "/v1/slack/workspace")).status).toBe(404);
    // Unbound, the team is free for the other org.
    expect((await api.request("PUT", "/v1/slack/workspace", { token: otherAdmin, body: { teamId: "T0AAA" } })).status).toBe(200);
  });
});
