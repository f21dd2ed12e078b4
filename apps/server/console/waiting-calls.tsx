// A card of a run's calls that wait for something outside (an approval, a result): one row each,
// with its tool, its arguments and until when it waits, and what a key that may write can do.
import type { ComponentChildren } from 'preact';
import type { Run } from './api.ts';
import { time } from './ui.tsx';

type WaitingCall = NonNullable<Run['pending_approvals']>[number];

export function WaitingCalls({
  title,
  calls,
  row,
  error,
  actions,
}: {
  title: string;
  calls: readonly WaitingCall[];
  /** The row's data attribute, naming the call: `data-approval`, `data-result`. */
  row: string;
  error: string;
  actions?: (call: WaitingCall) => ComponentChildren;
}) {
  return (
    <div class="card">
      <h2>{title}</h2>
      {error && <p class="error">{error}</p>}
      <table>
        <tbody>
          {calls.map((call) => (
            <tr {...{ [row]: call.tool_call_id }}>
              <td>{call.tool_name}</td>
              <td class="mono">{JSON.stringify(call.arguments)}</td>
              <td class="hide-narrow">until {time(call.expires_at)}</td>
              {actions && <td>{actions(call)}</td>}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
