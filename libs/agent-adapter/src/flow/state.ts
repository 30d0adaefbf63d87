import { Messages } from '../errors/messages';
import { FlowError, InvalidFlowState, type StateViolation } from '../errors';
import {
  assertJson,
  canonical,
  CanonicalText,
  canonicalObject,
  nestedTooDeep,
  tooDeep,
  type Json,
} from '../exec/durable/canonical-json';
import { requirePackage } from '../peers/optional-packages';
import type { StateClass } from './flow.interfaces';

// class-transformer/class-validator are loaded only by flows that declare a state class (checked
// installed when the Flow is built). Type-only imports are erased: these lines load nothing.
import type * as ClassTransformer from 'class-transformer';
import type * as ClassValidator from 'class-validator';
type Transformer = typeof ClassTransformer;
type Validator = typeof ClassValidator;
type ValidationError = ClassValidator.ValidationError;

/**
 * Converts between a flow's stored state (plain JSON) and what nodes see (an instance of the state
 * class, or a copy of the plain object). Nodes always get their own copy: a node cannot change the
 * snapshot its parallel siblings read.
 *
 * Between supersteps the runner holds the state encoded (`encode`): the canonical text of each key,
 * made once when the key was written. The checkpoint seals those texts as they are, and every view
 * is parsed from them, so no object that user code holds is part of the stored state.
 */
export class StateCodec<S> {
  constructor(
    private readonly flow: string,
    private readonly cls: StateClass<S> | undefined,
  ) {}

  /** Validates input (every violation named) and returns the plain state to store. */
  async fromInput(input: unknown): Promise<{ [key: string]: Json }> {
    if (typeof input !== 'object' || input === null || Array.isArray(input)) {
      throw new InvalidFlowState(this.flow, [
        { path: '$', messages: ['the input must be an object'] },
      ]);
    }
    let plain: unknown = input;
    if (this.cls) {
      const { plainToInstance, instanceToPlain } =
        this.load<Transformer>('class-transformer');
      const { validate } = this.load<Validator>('class-validator');
      try {
        const instance: object =
          input instanceof this.cls
            ? input
            : (plainToInstance(this.cls, input) as object);
        // A state class without validation decorators is fine: it still gives defaults and types.
        const errors = await validate(instance, { forbidUnknownValues: false });
        if (errors.length)
          throw new InvalidFlowState(this.flow, violations(errors));
        plain = instanceToPlain(instance);
      } catch (error) {
        // Those libraries recurse: input too deep to store overflows their stack first.
        if (error instanceof RangeError && nestedTooDeep(input))
          tooDeep('state', []);
        throw error;
      }
    }
    assertJson(plain, 'state');
    return plain as { [key: string]: Json };
  }

  /**
   * The state encoded key by key, as the runner holds it (see the class comment): `state` is the
   * plain state of a checkpoint or of the input (already checked), or already encoded.
   */
  encode(state: Json | CanonicalText): CanonicalText {
    if (state instanceof CanonicalText && state.members) return state;
    const plain = state instanceof CanonicalText ? state.value() : state;
    if (typeof plain !== 'object' || plain === null || Array.isArray(plain)) {
      throw new FlowError(Messages.stateNotObject(this.flow));
    }
    const members = new Map<string, CanonicalText>();
    for (const key of Object.keys(plain)) {
      const value = plain[key];
      if (value !== undefined)
        members.set(key, canonical(value, `state.${key}`));
    }
    return canonicalObject(members);
  }

  /** A fresh view of the stored state for one node (or for the result). */
  view(state: Json | CanonicalText): S {
    // Parsed from JSON text, not structuredClone: the stored state is plain JSON, so the copy is
    // exact, and its objects belong to the caller's realm. structuredClone's belong to Node's main
    // realm, which under Jest (a vm context) is another one: a node returning part of its state
    // (`{ items: [...s.items, x] }`) would then fail sealing as "not plain JSON data".
    const copy = JSON.parse(
      state instanceof CanonicalText ? state.text : JSON.stringify(state),
    ) as object;
    if (!this.cls) return copy as S;
    const { plainToInstance } = this.load<Transformer>('class-transformer');
    return plainToInstance(this.cls, copy);
  }

  private load<T>(name: string): T {
    return requirePackage<T>(name, 'stateClass', `Flow "${this.flow}"`);
  }
}

function violations(errors: ValidationError[], prefix = ''): StateViolation[] {
  return errors.flatMap((e) => {
    const path = prefix ? `${prefix}.${e.property}` : (e.property ?? '$');
    const own = e.constraints
      ? [{ path, messages: Object.values(e.constraints) }]
      : [];
    return [...own, ...violations(e.children ?? [], path)];
  });
}
