/** `isAnswered`: how a relay taking over an idle agent tells a finished turn from a prompt still on its way. */
import { describe, expect, it } from "vitest";
import type { AgentMessage } from "../../functions/relay/agent-messages";
import { isAnswered } from "../../functions/relay/relay";

const user = (id: string, text: string): AgentMessage => ({ info: { id, role: "user", time: { created: 1 } }, parts: [{ id: `p${id}`, type: "text", text }] });
const assistant = (id: string, completed: boolean): AgentMessage => ({
  info: { id, role: "assistant", time: { created: 2, ...(completed ? { completed: 3 } : {}) } },
  parts: [{ id: `p${id}`, type: "text", text: "echo" }],
});

describe("isAnswered", () => {
  it("the newest user message is the prompt and a completed answer follows it", () => {
    expect(isAnswered({ content: "b" }, [user("1", "a"), assistant("2", true), user("3", "b"), assistant("4", true)])).toBe(true);
  });

  it("not answered: no completed answer yet, an older prompt only, or not in the agent at all", () => {
    expect(isAnswered({ content: "b" }, [user("1", "a"), assistant("2", true), user("3", "b"), assistant("4", false)])).toBe(false);
    expect(isAnswered({ content: "a" }, [user("1", "a"), assistant("2", true), user("3", "b"), assistant("4", true)])).toBe(false);
    expect(isAnswered({ content: "c" }, [user("1", "a"), assistant("2", true)])).toBe(false);
    expect(isAnswered({ content: "c" }, [])).toBe(false);
  });

  it("synthetic text the agent added to the user message does not count as what was asked", () => {
    const withReminder: AgentMessage = { ...user("1", "a"), parts: [{ id: "x", type: "text", text: "a" }, { id: "y", type: "text", text: "<system-reminder>", synthetic: true }] };
    expect(isAnswered({ content: "a" }, [withReminder, assistant("2", true)])).toBe(true);
  });
});
