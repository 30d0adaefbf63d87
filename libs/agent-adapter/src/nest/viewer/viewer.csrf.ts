import {
  createHmac,
  hkdfSync,
  randomBytes,
  timingSafeEqual,
} from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { DurableFlowRunner } from '../durable-flow.runner';

/** The request header every viewer POST carries its token in. @internal */
export const CSRF_HEADER = 'x-agent-adapter-csrf';
/** The cookie the page sets with the same token. @internal */
export const CSRF_COOKIE = 'agent_adapter_csrf';

const TOKEN = /^v1\.([A-Za-z0-9_-]{22})\.([A-Za-z0-9_-]{43})$/;

/**
 * The viewer's CSRF tokens: signed double-submit. Each page load gets a fresh random nonce and its
 * HMAC-SHA256, `v1.<nonce>.<mac>`, in the page (a `<meta>`) and in a `SameSite=Strict; HttpOnly`
 * cookie scoped to the viewer's path. A POST must send it back in the `x-agent-adapter-csrf` header,
 * equal to the cookie and with a valid MAC. Another origin can make the browser send the cookie
 * (same site) but can neither read the page nor set the header without a CORS preflight the viewer
 * never answers; a cookie planted by a sibling subdomain does not verify without the secret.
 *
 * The secret is derived (HKDF-SHA256, its own label) from the module's current checkpoint key, so
 * every worker behind a load balancer accepts every other's tokens and the key itself never leaves
 * the process; without a key (the memory store) it is random per process.
 * @internal
 */
@Injectable()
export class ViewerCsrf {
  private readonly secret: Buffer;

  constructor(runner: DurableFlowRunner) {
    this.secret = Buffer.from(
      hkdfSync(
        'sha256',
        runner.core.keyRing.current.secret,
        Buffer.alloc(0),
        'agent-adapter run viewer csrf v1',
        32,
      ),
    );
  }

  /** A fresh token for one page. */
  issue(): string {
    const nonce = randomBytes(16).toString('base64url');
    return `v1.${nonce}.${this.mac(nonce)}`;
  }

  /** The `Set-Cookie` value carrying `token`, for the viewer's `path`. */
  cookie(token: string, path: string, secure: boolean): string {
    return `${CSRF_COOKIE}=${token}; Path=${path}; HttpOnly; SameSite=Strict${secure ? '; Secure' : ''}`;
  }

  /**
   * What is wrong with the token of a request (its header and its `Cookie` header), or undefined
   * when the header is a token this process signed and the cookie holds the same one.
   */
  problem(
    header: string | undefined,
    cookies: string | undefined,
  ): string | undefined {
    if (!header)
      return `no ${CSRF_HEADER} header (the viewer's page sends the token it was served with)`;
    const values = cookieValues(cookies, CSRF_COOKIE);
    if (values.length === 0)
      return `no ${CSRF_COOKIE} cookie (load the viewer's page first: it sets one for its path)`;
    // Every value is compared: a cookie of the same name for a longer path (or planted by a
    // sibling domain) may come first, and it proves nothing either way.
    if (!values.map((v) => sameText(header, v)).includes(true))
      return `the ${CSRF_HEADER} header does not match the ${CSRF_COOKIE} cookie (reload the viewer's page)`;
    const m = TOKEN.exec(header);
    if (!m || !sameText(m[2]!, this.mac(m[1]!)))
      return `the CSRF token is not one this viewer issued (reload the viewer's page)`;
    return undefined;
  }

  private mac(nonce: string): string {
    return createHmac('sha256', this.secret)
      .update(`v1.${nonce}`)
      .digest('base64url');
  }
}

/** Constant-time equality of two strings (their lengths are not secret). */
function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** The values of every cookie named `name` in a `Cookie` header. */
function cookieValues(header: string | undefined, name: string): string[] {
  const values: string[] = [];
  for (const part of (header ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name)
      values.push(part.slice(eq + 1).trim());
  }
  return values;
}
