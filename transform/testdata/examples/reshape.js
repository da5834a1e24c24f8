// A Shopify order in the shape a legacy endpoint expects.
const toOrder = (body) => ({
  order_id: body.id,
  email: body.email,
  total: parseFloat(body.total_price),
  currency: body.currency,
  items: (body.line_items || []).map((item) => ({
    sku: item.sku,
    quantity: item.quantity,
  })),
});

addHandler('transform', (request, context) => {
  request.body = toOrder(request.body);
  request.headers['x-shopify-topic'] = undefined;
  return request;
});
