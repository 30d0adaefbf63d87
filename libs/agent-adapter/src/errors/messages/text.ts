/** Class-validator violations as one line: `path: message; message | path: ...`. */
export function violationsText(
  violations: ReadonlyArray<{ path: string; messages: string[] }>,
): string {
  return violations
    .map((v) => `${v.path}: ${v.messages.join('; ')}`)
    .join(' | ');
}

/** A value as a message quotes it: a string as JSON (a long one cut short), else its kind. */
export function shown(value: unknown): string {
  if (typeof value === 'string') {
    return value.length > 60
      ? `${JSON.stringify(value.slice(0, 40))}... (${value.length} characters)`
      : JSON.stringify(value);
  }
  if (typeof value === 'function') return '(a function)';
  if (typeof value !== 'object' || value === null) return String(value);
  return Array.isArray(value) ? '(an array)' : '(an object)';
}

/** A value as an option error quotes it: functions by kind, numbers as they are, else as JSON. */
export function described(value: unknown): string {
  if (typeof value === 'function') return 'a function';
  if (typeof value === 'number' || typeof value === 'boolean')
    return String(value);
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}
