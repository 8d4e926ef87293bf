/** Bearer parsing and the constant-time token check: secure by default when no token is set. */
import { describe, expect, it } from "vitest";
import { authorized, bearerCredential, tokenMatches } from "../../sandbox/sidecar/auth";

describe("bearerCredential", () => {
  it("takes the credential of a Bearer header, case-insensitively on the scheme", () => {
    expect(bearerCredential("Bearer abc")).toBe("abc");
    expect(bearerCredential("bearer abc")).toBe("abc");
    expect(bearerCredential("Bearer   abc  ")).toBe("abc");
  });

  it.each([undefined, "", "Bearer", "Bearer ", "Basic abc", "abc", "Bearer a b", ["Bearer abc"]])("finds none in %j", (header) => {
    expect(bearerCredential(header)).toBeNull();
  });
});

describe("tokenMatches", () => {
  it("accepts only the exact token", () => {
    expect(tokenMatches("s3cret-token", "s3cret-token")).toBe(true);
    expect(tokenMatches("s3cret-tokeN", "s3cret-token")).toBe(false);
    expect(tokenMatches("s3cret-token-longer", "s3cret-token")).toBe(false);
    expect(tokenMatches("s3cret", "s3cret-token")).toBe(false);
  });

  it("refuses everything when no token is configured", () => {
    for (const presented of ["", "anything", "undefined", null]) {
      expect(tokenMatches(presented, undefined)).toBe(false);
      expect(tokenMatches(presented, "")).toBe(false);
    }
  });

  it("authorized combines both", () => {
    expect(authorized("Bearer t0ken", "t0ken")).toBe(true);
    expect(authorized("Bearer t0ken", undefined)).toBe(false);
    expect(authorized(undefined, "t0ken")).toBe(false);
  });
});
