import { createHash } from 'node:crypto';
import { VIEWER_SCRIPT } from './viewer.script';
import { NestMessages } from '../durable.messages';

const STYLE = `
  :root { font: 14px/1.45 system-ui, sans-serif; color: #1d2330; background: #f6f7f9; }
  body { margin: 0 auto; max-width: 1200px; padding: 16px 24px; }
  h1 { font-size: 20px; margin: 0 0 12px; } h1 a { color: inherit; text-decoration: none; }
  h2 { font-size: 16px; margin: 20px 0 8px; }
  table { border-collapse: collapse; width: 100%; background: #fff; }
  th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid #e3e6eb; vertical-align: top; }
  th { background: #eef1f5; font-weight: 600; }
  tr.doubt td { background: #fff1f0; }
  code, .mono { font-family: ui-monospace, monospace; font-size: 12px; word-break: break-all; }
  .badge { display: inline-block; padding: 1px 7px; border-radius: 9px; font-size: 12px; margin-right: 4px; color: #fff; }
  .b-done { background: #2f855a; } .b-running { background: #2b6cb0; } .b-paused { background: #b7791f; }
  .b-failed { background: #c53030; } .b-recovered { background: #6b46c1; } .b-doubt { background: #c05621; }
  .b-sleeping { background: #2c7a7b; } .b-other { background: #6b7785; }
  h2.run-id { font-family: ui-monospace, monospace; font-size: 18px; overflow-wrap: anywhere; word-break: normal; max-width: 100%; }
  .filters { display: flex; gap: 8px; margin-bottom: 12px; align-items: center; }
  .actions { display: flex; gap: 8px; align-items: center; margin: 12px 0; padding: 10px; background: #fff; border: 1px solid #e3e6eb; }
  button { padding: 5px 12px; border: 1px solid #9aa5b1; background: #fff; border-radius: 4px; cursor: pointer; }
  button.primary { background: #2b6cb0; color: #fff; border-color: #2b6cb0; }
  button.danger { background: #c53030; color: #fff; border-color: #c53030; }
  .error { color: #c53030; } .muted { color: #6b7785; }
  .reason { color: #c05621; font-weight: 600; }
  nav { display: flex; gap: 16px; margin: -4px 0 12px; }
  nav a { color: #2b6cb0; text-decoration: none; padding-bottom: 2px; }
  nav a.current { color: #1d2330; border-bottom: 2px solid #2b6cb0; }
`;

/** A CSP source for exactly this inline text. */
const hashOf = (text: string) =>
  `'sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}'`;

/**
 * The page's Content-Security-Policy: nothing but its own inline script and style (by hash), calls
 * to its own origin, never framed, no `<base>`, no form posts; Trusted Types with no policy, so an
 * HTML string can never be assigned to `innerHTML` and the like.
 * @internal
 */
export const PAGE_CSP = [
  "default-src 'none'",
  `script-src ${hashOf(VIEWER_SCRIPT)}`,
  `style-src ${hashOf(STYLE)}`,
  "connect-src 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'none'",
  "require-trusted-types-for 'script'",
  "trusted-types 'none'",
].join('; ');

/**
 * The run viewer's one page: plain HTML, CSS and JavaScript, no build step, nothing fetched from
 * the internet. It talks to the JSON API beside it (`<path>/api/...`) and sends `csrfToken` (the
 * one in the cookie set with this page) with every action. The only value in the markup is that
 * token (base64url and dots, checked); everything else is built by the script with DOM calls.
 * @internal
 */
export function viewerPage(csrfToken: string): string {
  if (!/^[A-Za-z0-9._-]+$/.test(csrfToken))
    throw new TypeError(NestMessages.viewerCsrfToken());
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="agent-adapter-csrf" content="${csrfToken}">
<title>Durable runs</title>
<style>${STYLE}</style>
</head>
<body>
<h1><a href="#/">Durable runs</a></h1>
<nav><a id="nav-runs" href="#/">Runs</a><a id="nav-schedules" href="#/schedules">Schedules</a></nav>
<div id="app"><p class="muted">Loading…</p></div>
<script>${VIEWER_SCRIPT}</script>
</body>
</html>`;
}
