/**
 * Seeded randomness for tests that explore interleavings, so that a failure can be replayed: a
 * test takes its seed from `testSeed()` (an environment variable when set, a fresh random seed
 * otherwise), names it on failure, and makes every random choice through `seededRandom(seed)`.
 */
import { randomInt } from "node:crypto";

/** Mulberry32: small, seeded, good enough to pick actions and orders (values in [0, 1)). */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const MAX_SEED = 0xffffffff;

/** The seed named by `envVar` (to replay a failure), or a fresh one. */
export function testSeed(envVar: string, env: NodeJS.ProcessEnv = process.env): number {
  const fixed = env[envVar]?.trim();
  if (!fixed) return randomInt(MAX_SEED);
  const seed = Number(fixed);
  if (!/^\d+$/.test(fixed) || seed > MAX_SEED) throw new Error(`${envVar} must be an integer from 0 to ${MAX_SEED}, got "${fixed}"`);
  return seed;
}

/** A uniformly shuffled copy of `items` (Fisher-Yates) drawn from `random`. */
export function shuffled<T>(items: readonly T[], random: () => number): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}
