addHandler('transform', (request, context) => {
  request.path = '/events/' + encodeURIComponent(request.body.type);
  request.query = 'tenant=' + request.parsed_query.tenant + '&via=jethook';
  return request;
});
