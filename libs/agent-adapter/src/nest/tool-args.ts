import type * as ClassTransformer from 'class-transformer';
import type * as ClassValidator from 'class-validator';
import type { StateViolation } from '../errors/errors';
import type { JsonSchema } from '../exec/tool.registry';
import {
  loadOptionalPackage,
  requirePackage,
} from '../peers/optional-packages';
import { InvalidToolArguments } from '../errors';
import type { ToolArgsClass } from './interfaces/tool-options.interface';

// class-validator/-transformer are optional peers, loaded only for tools that declare `args`
// (DurableModule checks them installed at bootstrap). The type-only imports above are erased.

/** The part of class-validator-jsonschema used here (an optional peer, loaded on demand). */
interface JsonSchemaGenerator {
  targetConstructorToSchema(dto: ToolArgsClass, options: object): object;
  validationMetadatasToSchemas(options: object): Record<string, object>;
}

const REF_PREFIX = '#/definitions/';

/** Validates a tool's arguments against its DTO class; knows how to store and restore them. */
export class ToolArgs {
  private readonly transformer: typeof ClassTransformer;
  private readonly validator: typeof ClassValidator;

  constructor(
    private readonly tool: string,
    private readonly dto: ToolArgsClass,
  ) {
    const context = `@Tool "${tool}"`;
    this.transformer = requirePackage<typeof ClassTransformer>(
      'class-transformer',
      'toolArguments',
      context,
    );
    this.validator = requirePackage<typeof ClassValidator>(
      'class-validator',
      'toolArguments',
      context,
    );
  }

  /**
   * The arguments as an instance of the DTO, checked (every violation named). Synchronous, so a
   * node's concurrent tool calls keep their order in the call log.
   */
  check(args: unknown): object {
    if (typeof args !== 'object' || args === null || Array.isArray(args)) {
      throw new InvalidToolArguments(this.tool, [
        { path: '$', messages: ['the arguments must be an object'] },
      ]);
    }
    const instance =
      args instanceof this.dto
        ? args
        : this.transformer.plainToInstance(this.dto, args);
    const errors = this.validator.validateSync(instance, {
      forbidUnknownValues: false,
    });
    if (errors.length)
      throw new InvalidToolArguments(this.tool, violations(errors));
    return instance;
  }

  /** The checked instance as plain data (what the call log stores). */
  toPlain(instance: object): unknown {
    return this.transformer.instanceToPlain(instance);
  }

  /**
   * The DTO's JSON schema (what a model is shown), from its class-validator decorators: nested
   * DTOs (`@ValidateNested()` + `@Type()`) are included under `definitions`. Undefined when the
   * optional `class-validator-jsonschema` package is not installed.
   */
  schema(): JsonSchema | undefined {
    const generator = loadOptionalPackage<JsonSchemaGenerator>(
      'class-validator-jsonschema',
    );
    if (!generator) return undefined;
    const storage = loadOptionalPackage<{ defaultMetadataStorage?: object }>(
      'class-transformer/cjs/storage',
    )?.defaultMetadataStorage;
    const options = {
      refPointerPrefix: REF_PREFIX,
      ...(storage && { classTransformerMetadataStorage: storage }),
    };
    const root = generator.targetConstructorToSchema(this.dto, options);
    const pending = refsOf(root);
    if (!pending.length) return asJson(root);
    // Only the definitions the schema reaches, so it stands on its own.
    const all = generator.validationMetadatasToSchemas(options);
    const definitions: Record<string, object> = {};
    for (let name = pending.pop(); name !== undefined; name = pending.pop()) {
      const found = all[name];
      if (found === undefined || name in definitions) continue;
      definitions[name] = found;
      pending.push(...refsOf(found));
    }
    return asJson({ ...root, definitions });
  }

  /** Stored (plain) arguments back as a DTO instance, for the method. */
  fromPlain(plain: unknown): object {
    return this.transformer.plainToInstance(this.dto, plain);
  }
}

function violations(
  errors: ClassValidator.ValidationError[],
  prefix = '',
): StateViolation[] {
  return errors.flatMap((e) => {
    const path = prefix ? `${prefix}.${e.property}` : e.property;
    const own = e.constraints
      ? [{ path, messages: Object.values(e.constraints) }]
      : [];
    return [...own, ...violations(e.children ?? [], path)];
  });
}

function refsOf(schema: object): string[] {
  const refs: string[] = [];
  JSON.stringify(schema, (key, value: unknown) => {
    if (
      key === '$ref' &&
      typeof value === 'string' &&
      value.startsWith(REF_PREFIX)
    )
      refs.push(value.slice(REF_PREFIX.length));
    return value;
  });
  return refs;
}

/** Plain JSON (the generator may leave `undefined` members). */
function asJson(schema: object): JsonSchema {
  return JSON.parse(JSON.stringify(schema)) as JsonSchema;
}
