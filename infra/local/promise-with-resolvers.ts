/**
 * `Promise.withResolvers` for Node 20 (it arrived in Node 22): aws-local-stepfunctions calls it.
 * Deployed Lambdas run nodejs22.x and never load this file; it installs nothing when present.
 */
interface WithResolvers {
  withResolvers?: <T>() => { promise: Promise<T>; resolve: (value: T | PromiseLike<T>) => void; reject: (reason?: unknown) => void };
}

const P = Promise as unknown as WithResolvers;
if (typeof P.withResolvers !== "function") {
  P.withResolvers = <T>() => {
    let resolve: (value: T | PromiseLike<T>) => void = () => undefined;
    let reject: (reason?: unknown) => void = () => undefined;
    const promise = new Promise<T>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    return { promise, resolve, reject };
  };
}

export {};
