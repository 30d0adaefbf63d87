import { Logger } from '@nestjs/common';
import { nestDurableLogger } from './nest-logger';

describe('nestDurableLogger', () => {
  afterEach(() => jest.restoreAllMocks());

  it("writes the core's warnings and errors through Nest's Logger, an error as its stack", () => {
    const warn = jest
      .spyOn(Logger.prototype, 'warn')
      .mockImplementation(() => {});
    const error = jest
      .spyOn(Logger.prototype, 'error')
      .mockImplementation(() => {});
    const logger = nestDurableLogger('DurableRunner');
    const boom = new Error('store down');
    logger.warn('lease renewal failed', boom);
    logger.error('a listener threw', boom);
    logger.error('plain', 'detail');
    expect(warn).toHaveBeenCalledWith(
      'lease renewal failed: Error: store down',
    );
    expect(error).toHaveBeenCalledWith('a listener threw', boom.stack);
    expect(error).toHaveBeenCalledWith('plain: detail', undefined);
  });
});
