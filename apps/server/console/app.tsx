// The arcflow console: a small Preact app over the HTTP API, bundled at package time.
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { type Me, type Problem, api } from './api.ts';
import { useRoute } from './hooks.ts';
import { OverviewPage } from './overview-page.tsx';
import { RunPage } from './run-page.tsx';
import { ThreadPage } from './thread-page.tsx';
import { Agents, Queues, RunsList, SignIn } from './views.tsx';

function App() {
  const route = useRoute();
  const [me, setMe] = useState<Me | null | undefined>(undefined);
  const load = () =>
    api<Me>('/console/me').then(setMe, (error) => {
      if ((error as Problem).status === 401) setMe(null);
    });
  useEffect(() => {
    load();
  }, []);
  if (me === undefined) return <p class="muted">Loading…</p>;
  if (me === null) return <SignIn onSignedIn={load} />;
  const signOut = async () => {
    await api('/console/session', { method: 'DELETE' });
    setMe(null);
  };
  const runMatch = /^#\/runs\/(.+)$/.exec(route);
  const threadMatch = /^#\/threads\/(.+)$/.exec(route);
  const tab = (href: string, label: string) => (
    <a href={href} class={route.startsWith(href) ? 'on' : ''}>
      {label}
    </a>
  );
  return (
    <div>
      <header>
        <strong>arcflow</strong>
        <nav>
          {tab('#/overview', 'Overview')}
          {tab('#/runs', 'Runs')}
          {tab('#/agents', 'Agents')}
          {tab('#/queues', 'Queues')}
        </nav>
        <span class="who">
          {me.name} ({me.scope})
          {!me.open && (
            <button type="button" onClick={signOut}>
              Sign out
            </button>
          )}
        </span>
      </header>
      <main>
        {runMatch ? (
          <RunPage run_id={decodeURIComponent(runMatch[1]!)} me={me} />
        ) : threadMatch ? (
          <ThreadPage thread_id={decodeURIComponent(threadMatch[1]!)} me={me} />
        ) : route.startsWith('#/overview') ? (
          <OverviewPage />
        ) : route.startsWith('#/agents') ? (
          <Agents />
        ) : route.startsWith('#/queues') ? (
          <Queues />
        ) : (
          <RunsList me={me} />
        )}
      </main>
    </div>
  );
}

render(<App />, document.getElementById('app')!);
