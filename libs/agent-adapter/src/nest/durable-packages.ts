import { Injectable } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper';
import { storeFeatures } from '../exec/checkpoints/create-store';
import { requireFeatures, type FeatureUse } from '../peers/optional-packages';
import { isCheckpointStore } from './create-store';
import { DurableMetadataAccessor } from './durable-metadata.accessor';
import type { CheckpointStoreDescriptor } from './interfaces/durable-module-options.interface';

/** @internal */
export type AnyClass = abstract new (...args: never[]) => unknown;

/**
 * The class of a provider: `useValue` providers have no metatype, and a `useFactory` provider's
 * metatype is the factory function (with `inject` set): there the class is the instance's
 * constructor, unknown until the factory has run.
 * @internal
 */
export function providerClass(wrapper: InstanceWrapper): AnyClass | undefined {
  if (wrapper.metatype && !wrapper.inject)
    return wrapper.metatype as unknown as AnyClass;
  const instance: unknown = wrapper.instance;
  if (typeof instance !== 'object' || instance === null) return undefined;
  return (instance as { constructor: AnyClass }).constructor;
}

/**
 * The optional features the providers use, read from their classes' decorators (no instance
 * needed): `@Flow({ state })` needs class-validator and class-transformer, and so does
 * `@Tool({ args })`. Factory providers count once their factory has run.
 * @internal
 */
export function providerFeatures(
  wrappers: readonly InstanceWrapper[],
  scanner: MetadataScanner,
  accessor: DurableMetadataAccessor,
): FeatureUse[] {
  const uses: FeatureUse[] = [];
  for (const wrapper of wrappers) {
    if (wrapper.isAlias) continue;
    const cls = providerClass(wrapper);
    const proto: unknown = cls?.prototype;
    if (!cls || typeof proto !== 'object' || proto === null) continue;
    if (proto === Object.prototype) continue; // a plain object value: no decorators
    const flow = accessor.getFlowMetadata(cls);
    if (accessor.getCronMetadata(cls).length > 0) {
      uses.push({ feature: 'schedules', by: `@DurableCron on ${cls.name}` });
    }
    if (flow?.state) {
      uses.push({
        feature: 'stateClass',
        by: `the state class of @Flow "${flow.name}"`,
      });
    }
    for (const method of scanner.getAllMethodNames(proto)) {
      const tool = accessor.getToolMetadata(
        (proto as Record<string, unknown>)[method],
      );
      if (tool?.args) {
        uses.push({
          feature: 'toolArguments',
          by: `the args of @Tool ${cls.name}#${method}`,
        });
      }
    }
  }
  return uses;
}

/** The features a `store` option needs: a descriptor's driver; an instance was checked when made. */
function storeUses(option: unknown): FeatureUse[] {
  if (
    typeof option !== 'object' ||
    option === null ||
    isCheckpointStore(option)
  )
    return [];
  const descriptor = option as CheckpointStoreDescriptor;
  return storeFeatures(descriptor).map((feature) => ({
    feature,
    by: `store { type: "${descriptor.type}" }`,
  }));
}

/**
 * Checks, once at bootstrap and before the store is created, that every optional package the
 * application's use of the module needs is installed: the store descriptor's driver, class-validator
 * and class-transformer for `@Flow` state classes and `@Tool({ args })`, the MCP SDK for `mcp`. One `DriverNotInstalledError`
 * names every missing package with the `npm install` command, so the application fails to start
 * instead of failing at its first request. Optional features (tracing, the event-emitter bridge,
 * argument schemas) are never required.
 * @internal
 */
@Injectable()
export class DurablePackages {
  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly accessor: DurableMetadataAccessor,
  ) {}

  /** Throws one error naming every missing package of the store and mcp options and the providers. */
  check(store?: unknown, mcp?: unknown): void {
    requireFeatures(
      [
        ...storeUses(store),
        ...(Array.isArray(mcp) && mcp.length > 0
          ? [{ feature: 'mcp' as const, by: 'the mcp option' }]
          : []),
        ...providerFeatures(
          this.discovery.getProviders(),
          this.scanner,
          this.accessor,
        ),
      ],
      'DurableModule',
    );
  }
}
