addHandler('transform', (request, context) => {
  request.headers['x-source'] = context.connection.source.name;
  request.headers['x-webhook-event-type'] = context.event_type;
  return request;
});
