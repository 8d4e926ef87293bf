/** The development model's `/tool <name> <JSON>` keyword (issue 25 §4 tests), through `planReply`. */
import { describe, expect, it } from "vitest";
import { planReply } from "../../sandbox/dev-model/server";

const user = (content: string) => ({ role: "user", content });

describe("planReply: /tool", () => {
  it("calls the named tool with the JSON arguments", () => {
    expect(planReply([user('please\n/tool save_snapshot {"message":"after setup"}')])).toEqual({ kind: "tool_call", name: "save_snapshot", arguments: { message: "after setup" } });
    expect(planReply([user("/tool save_snapshot")])).toEqual({ kind: "tool_call", name: "save_snapshot", arguments: {} });
  });

  it("answers with the tool's result once it is in the conversation (string or text parts)", () => {
    const prompt = user('/tool save_snapshot {"message":"x"}');
    expect(planReply([prompt, { role: "assistant", content: null }, { role: "tool", content: "Snapshot saved: lsnap_1" }])).toEqual({ kind: "text", text: "tool save_snapshot answered: Snapshot saved: lsnap_1" });
    expect(planReply([prompt, { role: "tool", content: [{ type: "text", text: "Error: nope" }] }])).toEqual({ kind: "text", text: "tool save_snapshot answered: Error: nope" });
  });

  it("says so when the arguments are not a JSON object, and leaves other prompts alone", () => {
    expect(planReply([user("/tool save_snapshot {not json}")])).toEqual({ kind: "text", text: "tool save_snapshot: the arguments are not a JSON object" });
    expect(planReply([user("mention /tool in passing")])).toEqual({ kind: "text", text: "echo: mention /tool in passing" });
  });
});
