/**
 * `fn()` as a promise, a synchronous throw as its rejection: what an `async` wrapper gives, without
 * the wrapper's own promise and await (and, for a returned promise, the extra job that adopts it).
 * The write path runs this several times per superstep, where each promise also pays the async
 * hooks that AsyncLocalStorage turns on.
 */
export function promised<T>(fn: () => T | PromiseLike<T>): Promise<T> {
  try {
    // A native promise comes back as it is: no new promise.
    return Promise.resolve(fn());
  } catch (error) {
    // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- what `fn` threw, as an async function rejects
    return Promise.reject(error);
  }
}
