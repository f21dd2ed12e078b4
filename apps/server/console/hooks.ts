// Hooks: polling, the hash route, and a run's events over Server-Sent Events.
import { useEffect, useState } from 'preact/hooks';
import type { Event } from './api.ts';

export function usePolled<T>(load: () => Promise<T>, ms: number, deps: unknown[], stop?: (value: T) => boolean): { value?: T; error?: string } {
  const [state, setState] = useState<{ value?: T; error?: string }>({});
  useEffect(() => {
    let live = true;
    let timer: number | undefined;
    const tick = async () => {
      try {
        const value = await load();
        if (!live) return;
        setState({ value });
        if (stop?.(value)) return;
      } catch (error) {
        if (live) setState((previous) => ({ ...previous, error: (error as Error).message }));
      }
      if (live) timer = window.setTimeout(tick, ms);
    };
    tick();
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, deps);
  return state;
}

export function useRoute(): string {
  const [hash, setHash] = useState(location.hash || '#/runs');
  useEffect(() => {
    const onChange = () => setHash(location.hash || '#/runs');
    addEventListener('hashchange', onChange);
    return () => removeEventListener('hashchange', onChange);
  }, []);
  return hash;
}

export function useEvents(run_id: string): Event[] {
  const [events, setEvents] = useState<Event[]>([]);
  useEffect(() => {
    setEvents([]);
    const source = new EventSource(`/v1/runs/${encodeURIComponent(run_id)}/events`);
    const seen = new Set<number>();
    source.onmessage = () => undefined;
    const onEvent = (message: MessageEvent) => {
      const event = JSON.parse(message.data) as Event;
      if (seen.has(event.seq)) return;
      seen.add(event.seq);
      setEvents((previous) => [...previous, event]);
      if (['RunCompleted', 'RunFailed', 'RunCancelled'].includes(event.kind)) source.close();
    };
    for (const kind of KINDS) source.addEventListener(kind, onEvent as EventListener);
    return () => source.close();
  }, [run_id]);
  return events;
}

const KINDS = [
  'RunEnqueued',
  'AgentInvoked',
  'ProviderRequestSent',
  'ProviderResponseReceived',
  'TokensConsumed',
  'ProviderRateLimited',
  'ProviderError',
  'ToolCallStarted',
  'ToolInputValidationFailed',
  'ToolCallCompleted',
  'ToolCallFailed',
  'LoopDetected',
  'AgentResponseReceived',
  'StepExecutionFailed',
  'StepStarted',
  'StepCompleted',
  'StepSkipped',
  'RunCompleted',
  'RunFailed',
  'RunCancelled',
  'DefinitionChanged',
  'ToolApprovalRequested',
  'ToolApprovalResolved',
  'ToolResultRequested',
  'MessagesInjected',
  'OutputValidationFailed',
  'StateUpdated',
];

/** An iteration's text as the console shows it: the last attempt's, as it streams. */
export interface StreamedText {
  readonly key: string;
  readonly text: string;
}

/**
 * The run's text, live, from its stream (SPEC §12): one entry per iteration that wrote text,
 * each the text of its last attempt (a `reset` empties it). The browser's EventSource resumes
 * after a dropped connection with Last-Event-ID, so nothing shows twice.
 */
export function useRunText(run_id: string): StreamedText[] {
  const [texts, setTexts] = useState<StreamedText[]>([]);
  useEffect(() => {
    setTexts([]);
    const source = new EventSource(`/v1/runs/${encodeURIComponent(run_id)}/stream`);
    let last = 0;
    const onChunk = (message: MessageEvent) => {
      const chunk = JSON.parse(message.data) as { offset: number; type: string; step_id?: string; iteration?: number; delta?: string };
      if (chunk.offset <= last) return;
      last = chunk.offset;
      if (chunk.type === 'end') {
        source.close();
        return;
      }
      const key = `${chunk.step_id}#${chunk.iteration}`;
      const delta = chunk.type === 'text' ? (chunk.delta ?? '') : undefined;
      const reset = chunk.type === 'reset';
      if (delta === undefined && !reset) return;
      setTexts((previous) => {
        const at = previous.findIndex((entry) => entry.key === key);
        if (at === -1) return delta === undefined ? previous : [...previous, { key, text: delta }];
        return previous.map((entry, index) => (index === at ? { key, text: reset ? '' : entry.text + delta } : entry));
      });
    };
    for (const type of ['text', 'reset', 'end']) source.addEventListener(type, onChunk as EventListener);
    return () => source.close();
  }, [run_id]);
  return texts;
}
