addHandler('transform', (request, context) => {
  request.headers['x-event-type'] = request.body.type;
  delete request.body.data.object.customer_email;
  return request;
});
