addHandler('transform', (request, context) => {
  if (!request.body || !request.body.event_type) {
    $transform.fail('missing event_type');
  }
  return request;
});
