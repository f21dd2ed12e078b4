/** How often the worker looks whether the process that started it is still there. */
const PARENT_CHECK_MS = 1_000;

/**
 * Calls `onGone` once when the process that started this one has ended: this process was then
 * handed to another parent (init, or a subreaper), so its `ppid` changed. A package runner
 * (`npx arcflow worker`) that is stopped may exit without passing the signal on; the worker must
 * not go on taking jobs on its own. Returns a function that stops the watch.
 */
export function watchParent(onGone: () => void, everyMs = PARENT_CHECK_MS): () => void {
  const parent = process.ppid;
  const timer = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(timer);
    onGone();
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
