/**
 * AWS SDK clients built on first use (issue 13: cold import). Every Lambda reads the table, so
 * the DynamoDB SDK loads at cold start (functions/store/dynamodb-sdk.ts); every other client
 * package (Step Functions, Scheduler, the API Gateway management API, KMS, Lambda, Secrets
 * Manager) is loaded by a dynamic `import()` when its adapter first sends: a function that never
 * starts a flow never loads the Step Functions SDK, and one that does loads it on its first call
 * instead of at cold start.
 * test/infra/control-plane-stack.test.ts pins that no HTTP or WebSocket route bundle imports
 * them statically nor loads them at cold start.
 *
 * So the adapters take a `ClientFactory`, called once on first use: the composition roots pass
 * one that loads the SDK module (`sfnClient`...), tests and scripts one that returns a client
 * they built (aws-sdk-client-mock mocks the class's prototype, which a loaded module shares).
 */
import type { SecretsManagerClient } from "@aws-sdk/client-secrets-manager";

/** Builds an adapter's SDK client; called once, on the adapter's first call. */
export type ClientFactory<C> = () => C | Promise<C>;

/** `factory`'s client, built on first use and then shared; a failed build is retried by the next call. */
export function onFirstUse<C>(factory: ClientFactory<C>): () => Promise<C> {
  let client: Promise<C> | undefined;
  return () => {
    client ??= Promise.resolve()
      .then(factory)
      .catch((err: unknown) => {
        client = undefined;
        throw err;
      });
    return client;
  };
}

/** An SDK error by its name (the class is in a module loaded lazily, and names survive across copies of it). */
export function hasErrorName(err: unknown, name: string): boolean {
  return (err as { name?: string } | null)?.name === name;
}

/** A Secrets Manager client, its SDK loaded by this call (functions/config: the sandbox keyring, the provider secret). */
export async function secretsManagerClient(): Promise<SecretsManagerClient> {
  return new (await import("@aws-sdk/client-secrets-manager")).SecretsManagerClient({});
}
